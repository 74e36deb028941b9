// Single-node limiter (no REDIS_URL): per key, the admission times of the current window in a
// ring of `limit` slots. Idle keys are swept so the map does not grow with every key ever seen,
// and the keys are at most `maxKeys` (a flood of distinct addresses or emails within one window
// would otherwise grow it by rate × window): past it, idle keys are swept at once and, if that is
// not enough, the oldest keys (first seen) are dropped down to 90 % of the bound. A dropped key
// starts a fresh window: the flood can cost an old key its count, never the node its memory.
//
// A ring, not an array that grows by push and is sliced as the window slides: the ring is
// allocated once per key (again only if the key's limit rises), and a hit writes one number in
// place, so memory per key is bounded by its limit and a tenant sending at its limit all day
// allocates nothing per request (the array was reallocated as it grew and, once the window slid,
// copied anew, ~8 KB, every ~1,000 requests). 0.07 µs a hit against 0.10 on 694 tenant keys in a loop;
// the bench's session reads did not change (bench/RESULTS.md, "What moved the figures", dc8e75e: its
// 12 s runs never slide a 60 s window).
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

/** Keys held at most unless `maxKeys` says otherwise (docs/memory-bounds.md). */
export const MAX_KEYS = 100_000

export interface MemoryRateLimiterOptions {
  now(): number
  sweepEvery?: number
  /**
   * At most this many keys (default MAX_KEYS). A new key past it sweeps the idle ones and, if that
   * is not enough, drops the least recently hit tenth: Map order is recency, so a key being hit
   * (an account under attack) is the last one dropped.
   */
  maxKeys?: number
}

export function createMemoryRateLimiter(o: MemoryRateLimiterOptions): RateLimiter & { readonly size: number } {
  const windows = new Map<string, Window>()
  const sweepEvery = o.sweepEvery ?? 10_000
  const maxKeys = o.maxKeys ?? MAX_KEYS
  let calls = 0
  let longestWindow = 60_000

  const newest = (w: Window) => w.times[(w.head + w.count - 1) % w.times.length]!

  function sweep(now: number) {
    for (const [k, w] of windows) if (w.count === 0 || newest(w) <= now - longestWindow) windows.delete(k)
  }

  function makeRoom(now: number) {
    sweep(now)
    if (windows.size < maxKeys) return
    let drop = windows.size - Math.floor(maxKeys * 0.9)
    for (const k of windows.keys()) {
      if (drop-- <= 0) break
      windows.delete(k)
    }
  }

  return {
    get size() { return windows.size },
    hit(key, limit, windowMs = 60_000): RateDecision {
      const now = o.now()
      if (windowMs > longestWindow) longestWindow = windowMs
      if (++calls % sweepEvery === 0) sweep(now)
      let w = windows.get(key)
      if (!w) {
        if (windows.size >= maxKeys) makeRoom(now)
        windows.set(key, (w = ring(Math.max(1, limit))))
      } else {
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
