// Single-node limiter (no REDIS_URL): per key, the admission times of the current window in a
// queue. Idle keys are swept so the map does not grow with every key ever seen.
import type { RateDecision, RateLimiter } from './limiter.js'

interface Window { times: number[]; head: number }

export function createMemoryRateLimiter(o: { now(): number; sweepEvery?: number }): RateLimiter {
  const windows = new Map<string, Window>()
  const sweepEvery = o.sweepEvery ?? 10_000
  let calls = 0
  let longestWindow = 60_000

  function sweep(now: number) {
    for (const [k, w] of windows) if (w.times.length === w.head || w.times[w.times.length - 1]! <= now - longestWindow) windows.delete(k)
  }

  return {
    hit(key, limit, windowMs = 60_000): RateDecision {
      const now = o.now()
      if (windowMs > longestWindow) longestWindow = windowMs
      if (++calls % sweepEvery === 0) sweep(now)
      let w = windows.get(key)
      if (!w) windows.set(key, (w = { times: [], head: 0 }))
      const cutoff = now - windowMs
      while (w.head < w.times.length && w.times[w.head]! <= cutoff) w.head++
      if (w.head > 1024 && w.head * 2 > w.times.length) {
        w.times = w.times.slice(w.head)
        w.head = 0
      }
      const count = w.times.length - w.head
      if (count < limit) {
        w.times.push(now)
        const oldest = w.times[w.head]!
        return { allowed: true, limit, remaining: limit - count - 1, resetAt: oldest + windowMs }
      }
      const oldest = w.times[w.head]!
      return { allowed: false, limit, remaining: 0, resetAt: oldest + windowMs }
    },
  }
}
