// Single-node limiter (no REDIS_URL): per key, the admission times of the current window in a
// ring of `limit` slots. Idle keys are swept so the map does not grow with every key ever seen.
//
// A ring, not an array that grows by push and is sliced as the window slides: the ring is
// allocated once per key (again only if the key's limit rises), and a hit writes one number in
// place, so memory per key is bounded by its limit and a tenant sending at its limit all day
// allocates nothing per request (the array was reallocated as it grew and, once the window slid,
// copied anew, ~8 KB, every ~1,000 requests). 0.07 µs a hit against 0.10 on 694 tenant keys in a loop;
// the bench's session reads did not change (bench/RESULTS.md, twelfth session: its 12 s runs never
// slide a 60 s window).
import type { RateDecision, RateLimiter } from './limiter.js'

interface Window {
  /** Admission times, oldest at `head`; `count` of them are in the window (as of the last hit). */
  times: number[]
  head: number
  count: number
}

/** A ring of `size` slots holding the `count` times of `from` (oldest first), at head 0. */
function ring(size: number, from?: Window): Window {
  const times = new Array<number>(size).fill(0)
  if (!from) return { times, head: 0, count: 0 }
  const n = from.times.length
  for (let i = 0; i < from.count; i++) times[i] = from.times[(from.head + i) % n]!
  return { times, head: 0, count: from.count }
}

export interface MemoryRateLimiterOptions {
  now(): number
  sweepEvery?: number
  /**
   * At most this many keys: a new key past it drops the least recently hit one (O(1); idle keys
   * also go with the sweep). Unset: unbounded (the tenant limit's keys are the tenants, a bounded set).
   */
  maxKeys?: number
}

export function createMemoryRateLimiter(o: MemoryRateLimiterOptions): RateLimiter & { size(): number } {
  const windows = new Map<string, Window>()
  const maxKeys = o.maxKeys
  const sweepEvery = o.sweepEvery ?? 10_000
  let calls = 0
  let longestWindow = 60_000

  const newest = (w: Window) => w.times[(w.head + w.count - 1) % w.times.length]!

  function sweep(now: number) {
    for (const [k, w] of windows) if (w.count === 0 || newest(w) <= now - longestWindow) windows.delete(k)
  }

  return {
    size: () => windows.size,
    hit(key, limit, windowMs = 60_000): RateDecision {
      const now = o.now()
      if (windowMs > longestWindow) longestWindow = windowMs
      if (++calls % sweepEvery === 0) sweep(now)
      let w = windows.get(key)
      if (!w) {
        if (maxKeys !== undefined && windows.size >= maxKeys) windows.delete(windows.keys().next().value!)
        windows.set(key, (w = ring(Math.max(1, limit))))
      } else if (maxKeys !== undefined) {
        // Map order is recency: a key being hit (an account under attack) is the last one dropped.
        windows.delete(key)
        windows.set(key, w)
      }
      const cutoff = now - windowMs
      const size = w.times.length
      while (w.count > 0 && w.times[w.head]! <= cutoff) {
        w.head = w.head + 1 === size ? 0 : w.head + 1
        w.count--
      }
      if (w.count < limit) {
        // The tier's limit rose above the ring (an upgrade): a larger ring, in order.
        if (w.count === size) windows.set(key, (w = ring(limit, w)))
        const n = w.times.length
        w.times[(w.head + w.count) % n] = now
        w.count++
        return { allowed: true, limit, remaining: limit - w.count, resetAt: w.times[w.head]! + windowMs }
      }
      return { allowed: false, limit, remaining: 0, resetAt: w.times[w.head]! + windowMs }
    },
  }
}
