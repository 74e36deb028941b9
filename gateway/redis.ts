// The request path's Redis connection (rate limits, health), with REDIS_URL: no offline queue, so
// a Redis outage costs a request milliseconds, never a wait for the reconnect (a request waits at
// most LIMITER_TIMEOUT_MS, see api/rate-limit/limiter.ts; commandTimeout only bounds what a dead
// connection holds); reconnects at most 1 s apart. The bus has its own two (gateway/bus.ts).
import type { Redis } from 'ioredis'
import type { Logger } from 'pino'
import type { ShutdownStack } from './shutdown.js'

export async function connectRequestRedis(url: string, log: Pick<Logger, 'warn'>, shutdown: ShutdownStack): Promise<Redis> {
  const { Redis: RedisClient } = await import('ioredis') // only with a REDIS_URL (gateway/bus.ts)
  const r = new RedisClient(url, { enableOfflineQueue: false, commandTimeout: 500, maxRetriesPerRequest: 0, retryStrategy: n => Math.min(n * 100, 1_000) })
  r.on('error', () => log.warn({ component: 'redis', code: 'redis-error' }, 'recoverable error'))
  shutdown.defer(() => (r.status === 'ready' ? r.quit().then(() => {}, () => r.disconnect()) : r.disconnect()))
  // Boot gives the first connection a moment (the first requests then get real decisions); it
  // never waits for Redis itself.
  if (r.status !== 'ready') {
    await new Promise<void>(resolve => {
      const done = () => { clearTimeout(timer); r.off('ready', done).off('error', done); resolve() }
      const timer = setTimeout(done, 1_000)
      r.once('ready', done).once('error', done)
    })
  }
  return r
}
