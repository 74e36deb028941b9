// Keeps several nodes' engines in step (design card): every committed session change and every
// event is announced on a Redis stream; the other nodes reload the session from Postgres (the
// source of truth) and fan the event out to their own WebSocket clients. Messages carry ids and
// event envelopes only, never a phone number, so Redis never holds one.
// Without REDIS_URL there is a single node and the in-process bus delivers nothing to anyone.
// Redis going away never blocks or fails the request path (issue 18): publish() only queues, both
// connections reconnect by themselves, and errors are reported at most once a second per kind.
// Messages of the outage are lost on the bus (Postgres keeps them).
import { Redis } from 'ioredis'
import type { EventEnvelope } from '../api/vocabulary/event-envelope.js'

export type BusMessage =
  | { kind: 'session'; id: string; version: number }
  | { kind: 'tenant'; id: string }
  | { kind: 'event'; envelope: EventEnvelope }

export interface Bus {
  readonly kind: 'redis' | 'in-process'
  publish(msgs: BusMessage[]): void
  /**
   * Resolves once what was published so far is in Redis (so a node that announced a change, e.g.
   * a key rotation, can answer after the other nodes could have read it). At once when Redis is
   * not connected: nothing waits for a reconnect.
   */
  settled(): Promise<void>
  /** Messages published by OTHER nodes. */
  onMessage(handler: (msg: BusMessage) => void): void
  ping(): Promise<'ok' | 'down'>
  close(): Promise<void>
}

export function createInProcessBus(): Bus {
  return {
    kind: 'in-process',
    publish() {},
    async settled() {},
    onMessage() {},
    async ping() { return 'ok' },
    async close() {},
  }
}

const STREAM = 'maskline:bus'
const MAXLEN = 100_000
/** Reconnect attempts at most this far apart, so the bus resumes soon after Redis returns. */
const RECONNECT_MAX_MS = 1_000
const REPORT_EVERY_MS = 1_000

export function createRedisBus(opts: { url: string; nodeId: string; onError: (code: string) => void; stream?: string }): Bus {
  const stream = opts.stream ?? STREAM
  const retryStrategy = (n: number) => Math.min(n * 100, RECONNECT_MAX_MS)
  // One report per kind per second: an outage must not log a line per publish or reconnect.
  const reported = new Map<string, number>()
  const onError = (code: string) => {
    const t = performance.now()
    if (t - (reported.get(code) ?? -Infinity) < REPORT_EVERY_MS) return
    reported.set(code, t)
    opts.onError(code)
  }
  // Separate connections: XREAD BLOCK holds its connection. The publisher's offline queue carries
  // a short blip; after 3 failed reconnects it is flushed (the publishes are dropped), so it stays small.
  const pub = new Redis(opts.url, { lazyConnect: false, maxRetriesPerRequest: 2, enableOfflineQueue: true, retryStrategy })
  const sub = new Redis(opts.url, { lazyConnect: false, maxRetriesPerRequest: null, retryStrategy })
  pub.on('error', () => onError('redis-pub'))
  sub.on('error', () => onError('redis-sub'))
  const handlers: Array<(m: BusMessage) => void> = []
  let closed = false
  let pending: string[] = []
  let scheduled = false
  let lastFlush: Promise<unknown> = Promise.resolve()

  function flush() {
    scheduled = false
    if (!pending.length) return
    const batch = pending
    pending = []
    const p = pub.pipeline()
    for (const body of batch) p.xadd(stream, 'MAXLEN', '~', String(MAXLEN), '*', 'n', opts.nodeId, 'm', body)
    lastFlush = p.exec().catch(() => onError('redis-publish'))
  }

  async function readLoop() {
    let last = '$'
    while (!closed) {
      try {
        const res = await sub.xread('COUNT', 500, 'BLOCK', 1000, 'STREAMS', stream, last) as Array<[string, Array<[string, string[]]>]> | null
        if (!res) continue
        for (const [, entries] of res) {
          for (const [id, fields] of entries) {
            last = id
            const node = fields[1]
            if (node === opts.nodeId) continue
            let msg: BusMessage
            try { msg = JSON.parse(fields[3] ?? '') } catch { continue }
            for (const h of handlers) h(msg)
          }
        }
      } catch {
        if (closed) return
        onError('redis-read')
        await new Promise(r => setTimeout(r, 500))
      }
    }
  }
  void readLoop()

  return {
    kind: 'redis',
    publish(msgs) {
      for (const m of msgs) pending.push(JSON.stringify(m))
      // Coalesce the messages of one tick into one pipeline round trip.
      if (!scheduled && pending.length) { scheduled = true; queueMicrotask(flush) }
    },
    async settled() {
      if (pub.status !== 'ready') return
      if (scheduled) flush()
      await lastFlush
    },
    onMessage(h) { handlers.push(h) },
    async ping() {
      if (pub.status !== 'ready') return 'down' // never wait for a reconnect
      try { return (await pub.ping()) === 'PONG' ? 'ok' : 'down' } catch { return 'down' }
    },
    async close() {
      closed = true
      if (pending.length) flush()
      sub.disconnect()
      if (pub.status === 'ready') await pub.quit().catch(() => pub.disconnect())
      else pub.disconnect()
    },
  }
}

export function createBus(opts: { redisUrl: string | undefined; nodeId: string; onError: (code: string) => void }): Bus {
  return opts.redisUrl ? createRedisBus({ url: opts.redisUrl, nodeId: opts.nodeId, onError: opts.onError }) : createInProcessBus()
}
