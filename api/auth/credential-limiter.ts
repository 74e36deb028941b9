// The credential throttles (token exchange, dashboard login, signup, failed sign-ins per account)
// degrade, never lock out: when the shared limiter cannot decide (Redis down or too slow, see
// composeRateLimiter), this node counts the attempt in its own memory with the same limits. Brute
// force stays bounded per node (across N nodes, limits × N during the outage: docs/operations.md,
// "Redis outage"), and a client whose token expires during the outage still gets one. Once Redis answers
// again its decisions are used; what was counted here meanwhile is not carried over.
//
// Memory is bounded: one in-memory limiter per throttle kind (the text before the first ':' of
// the key), each holding at most FALLBACK_MAX_KEYS keys (past it the idle ones are swept, then the
// least recently hit tenth dropped: api/rate-limit/memory.ts). Per kind, so that random API keys sent to
// the token exchange, which cost nothing, cannot push out an account under attack.
import type { Services } from '../services.js'
import type { RateDecision } from '../rate-limit/limiter.js'
import { createMemoryRateLimiter } from '../rate-limit/memory.js'

/** Keys per throttle kind in a node's fallback: a few MB at most (a key's ring holds `limit` times). */
export const FALLBACK_MAX_KEYS = 10_000

type Fallback = ReturnType<typeof createMemoryRateLimiter>
const fallbacksBy = new WeakMap<Services, Map<string, Fallback>>()

function fallbackFor(s: Services, key: string): Fallback {
  let kinds = fallbacksBy.get(s)
  if (!kinds) fallbacksBy.set(s, (kinds = new Map()))
  const kind = key.slice(0, Math.max(0, key.indexOf(':')))
  let f = kinds.get(kind)
  if (!f) kinds.set(kind, (f = createMemoryRateLimiter({ now: s.now, maxKeys: FALLBACK_MAX_KEYS, sweepEvery: 1_000 })))
  return f
}

/** A credential throttle's decision: the shared limiter's, or this node's while it cannot decide. */
export async function credentialHit(s: Services, key: string, limit: number, windowMs: number): Promise<RateDecision> {
  const d = await s.rateLimiter.hit(key, limit, windowMs)
  return d.unavailable ? fallbackFor(s, key).hit(key, limit, windowMs) as RateDecision : d
}

/** Keys held by this node's fallback, per kind (tests). */
export function fallbackSizes(s: Services): Record<string, number> {
  return Object.fromEntries([...fallbacksBy.get(s) ?? []].map(([kind, f]) => [kind, f.size]))
}
