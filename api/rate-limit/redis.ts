// Cluster-wide limiter (REDIS_URL set): one sorted set per key, trimmed, counted and appended
// in a single Lua script, so concurrent requests on several nodes cannot both take the last slot.
// Time comes from the caller (an injectable clock; nodes are NTP-synchronised). Keys expire
// with the window, so idle tenants leave nothing behind.
// Give it a connection without an offline queue (gateway/redis.ts): while Redis is unreachable
// a command then fails at once instead of waiting for the reconnect, and composeRateLimiter
// (limiter.ts) turns failures and slow answers into an `unavailable` decision (contract D13).
import { randomBytes } from 'node:crypto'
import type { Redis } from 'ioredis'
import type { RateDecision, RateLimiter } from './limiter.js'

// KEYS[1] = set, ARGV = now, window, limit, member → { allowed, count before, oldest score }
const SCRIPT = `
local key = KEYS[1]
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
local count = redis.call('ZCARD', key)
local allowed = 0
if count < limit then
  redis.call('ZADD', key, now, ARGV[4])
  allowed = 1
end
redis.call('PEXPIRE', key, window)
local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
local first = now
if oldest[2] then first = tonumber(oldest[2]) end
return { allowed, count, tostring(first) }
`

export interface RedisRateLimiterOptions {
  redis: Redis
  now(): number
  /** Prefix of every key, e.g. `maskline:rl:`. */
  prefix?: string
}

export function createRedisRateLimiter(o: RedisRateLimiterOptions): RateLimiter {
  const prefix = o.prefix ?? 'maskline:rl:'
  const node = randomBytes(4).toString('hex')
  let seq = 0
  const redis = o.redis as Redis & { maskRateLimit?: (key: string, ...args: (string | number)[]) => Promise<[number, number, string]> }
  if (!redis.maskRateLimit) redis.defineCommand('maskRateLimit', { numberOfKeys: 1, lua: SCRIPT })

  return {
    async hit(key, limit, windowMs = 60_000): Promise<RateDecision> {
      const now = o.now()
      // Unique per admission even when two requests share a millisecond.
      const member = `${now}:${node}:${(seq = (seq + 1) % 1e9)}`
      const [allowed, count, oldest] = await redis.maskRateLimit!(prefix + key, now, windowMs, limit, member)
      const first = Number(oldest)
      return allowed === 1
        ? { allowed: true, limit, remaining: limit - count - 1, resetAt: first + windowMs }
        : { allowed: false, limit, remaining: 0, resetAt: first + windowMs }
    },
  }
}
