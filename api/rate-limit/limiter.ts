// Sliding-window request limits (spec 8.1, 8.3, 8.4). A request is admitted when fewer than
// `limit` requests were admitted under the same key in the last `windowMs`; refused requests are
// not counted, so a client that backs off recovers as the window slides.
import type { Services } from '../services.js'
import { createMemoryRateLimiter } from './memory.js'

export const WINDOW_MS = 60_000
export const POLICY = 'sliding-window-60s'
/** Spec 8.4. */
export const TOKEN_LIMIT_PER_KEY = 10
export const LOGIN_LIMIT_PER_IP = 5

export interface RateDecision {
  allowed: boolean
  limit: number
  /** Requests left in the window after this one. */
  remaining: number
  /** Epoch ms when the oldest request in the window ages out. */
  resetAt: number
}

export interface RateLimiter {
  hit(key: string, limit: number, windowMs?: number): Promise<RateDecision> | RateDecision
  close?(): Promise<void>
}

/** The headers of spec 8.3, on every response of a rate-limited route; Retry-After on refusals. */
export function rateLimitHeaders(d: RateDecision, now: number): Record<string, string> {
  const h: Record<string, string> = {
    'x-ratelimit-limit': String(d.limit),
    'x-ratelimit-remaining': String(d.remaining),
    'x-ratelimit-reset': String(Math.ceil(d.resetAt / 1000)),
    'x-ratelimit-policy': POLICY,
  }
  if (!d.allowed) h['retry-after'] = String(Math.max(1, Math.ceil((d.resetAt - now) / 1000)))
  return h
}

const byServices = new WeakMap<object, RateLimiter>()

/** `services.rateLimiter` when the composition root set one (Redis), else one in-memory limiter per Services. */
export function rateLimiterOf(services: Services): RateLimiter {
  if (services.rateLimiter) return services.rateLimiter
  let l = byServices.get(services)
  if (!l) {
    l = createMemoryRateLimiter({ now: () => services.now() })
    byServices.set(services, l)
  }
  return l
}
