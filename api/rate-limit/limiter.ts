// Sliding-window request limits (contract 8.1, 8.3, 8.4). A request is admitted when fewer than
// `limit` requests were admitted under the same key in the last `windowMs`; refused requests are
// not counted, so a client that backs off recovers as the window slides.
import type { Logger } from 'pino'
import { createMemoryRateLimiter } from './memory.js'
import { MasklineError } from '../../engine/errors.js'

export const WINDOW_MS = 60_000
const POLICY = 'sliding-window-60s'
/** Contract 8.4. */
export const TOKEN_LIMIT_PER_KEY = 10
export const LOGIN_LIMIT_PER_IP = 5

export interface RateDecision {
  allowed: boolean
  limit: number
  /** Requests left in the window after this one. */
  remaining: number
  /** Epoch ms when the oldest request in the window ages out. */
  resetAt: number
  /**
   * The limiter could not decide (Redis unreachable or too slow, see composeRateLimiter): `allowed` is
   * true and no headers are sent, so the tenant limit fails open; the credential throttles count
   * on this node instead (api/auth/credential-limiter.ts).
   */
  unavailable?: true
}

export interface RateLimiter {
  hit(key: string, limit: number, windowMs?: number): Promise<RateDecision> | RateDecision
  close?(): Promise<void>
}

/** The headers of contract 8.3, on every response of a rate-limited route; Retry-After on refusals. */
export function rateLimitHeaders(d: RateDecision, now: number): Record<string, string> {
  if (d.unavailable) return {} // no decision, nothing to tell
  const h: Record<string, string> = {
    'x-ratelimit-limit': String(d.limit),
    'x-ratelimit-remaining': String(d.remaining),
    'x-ratelimit-reset': String(Math.ceil(d.resetAt / 1000)),
    'x-ratelimit-policy': POLICY,
  }
  if (!d.allowed) h['retry-after'] = String(Math.max(1, Math.ceil((d.resetAt - now) / 1000)))
  return h
}

/**
 * How long a request waits for a shared limiter's answer (contract D13): past it the limiter counts as
 * unavailable. A Redis round trip on a healthy network takes well under a millisecond; the margin
 * is for a busy machine.
 */
export const LIMITER_TIMEOUT_MS = 100
/** At most one warning line per this many ms while the limiter keeps failing (with a count). */
const WARN_EVERY_MS = 1_000

/**
 * The limiter a composition root puts on Services: the shared one (Redis) when there is one, else
 * an in-memory limiter of this process. The shared one is guarded: a throw, a rejection or no
 * answer within LIMITER_TIMEOUT_MS becomes an `unavailable` decision, never an error or a wait.
 */
export function composeRateLimiter(o: { shared?: RateLimiter | undefined; now: () => number; log: Pick<Logger, 'warn' | 'info'> }): RateLimiter {
  return o.shared ? guardLimiter(o.shared, o) : createMemoryRateLimiter({ now: o.now })
}

function guardLimiter(inner: RateLimiter, services: { now: () => number; log: Pick<Logger, 'warn' | 'info'> }): RateLimiter {
  let undecided = 0 // since the last warning line
  let failing = false
  let lastWarn = -Infinity

  function unavailable(err: unknown, limit: number): RateDecision {
    undecided++
    failing = true
    const t = performance.now()
    if (t - lastWarn >= WARN_EVERY_MS) {
      services.log.warn({ code: 'rate-limiter', error: err, undecided }, 'rate limiter unavailable; tenant requests admitted, credential throttles counted on this node')
      lastWarn = t
      undecided = 0
    }
    return { allowed: true, limit, remaining: limit, resetAt: services.now(), unavailable: true }
  }
  function decided(d: RateDecision): RateDecision {
    if (failing) {
      services.log.info({ code: 'rate-limiter-back', undecided }, 'rate limiter available again')
      failing = false
      undecided = 0
      lastWarn = -Infinity
    }
    return d
  }

  return {
    hit(key, limit, windowMs) {
      let r: Promise<RateDecision> | RateDecision
      try {
        r = inner.hit(key, limit, windowMs)
      } catch (err) {
        return unavailable(err, limit)
      }
      if (typeof (r as Promise<RateDecision>).then !== 'function') return decided(r as RateDecision)
      const pending = r as Promise<RateDecision>
      return new Promise<RateDecision>(resolve => {
        let settled = false
        // After a blocked event loop the timer runs before the socket is read: one more turn
        // (setImmediate runs after the poll phase) lets an answer already received win.
        const timer = setTimeout(() => setImmediate(() => {
          if (settled) return
          settled = true
          resolve(unavailable(new LimiterTimeout(), limit))
        }), LIMITER_TIMEOUT_MS)
        // Both outcomes are handled, also after the timeout: a late rejection is never unhandled.
        pending.then(
          d => { if (!settled) { settled = true; clearTimeout(timer); resolve(decided(d)) } },
          err => { if (!settled) { settled = true; clearTimeout(timer); resolve(unavailable(err, limit)) } },
        )
      })
    },
    ...(inner.close ? { close: () => inner.close!() } : {}),
  }
}

class LimiterTimeout extends MasklineError {
  constructor() {
    super('ML_ERR_LIMITER_TIMEOUT', `no answer from the rate limiter within ${LIMITER_TIMEOUT_MS} ms`)
  }
}
