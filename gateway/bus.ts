// Keeps several nodes' engines in step (design card): every committed session change and every
// event is announced on a Redis stream; the other nodes reload the session from Postgres (the
// source of truth) and fan the event out to their own WebSocket clients. Messages carry ids and
// event envelopes only, never a phone number, so Redis never holds one.
// Without REDIS_URL there is a single node and the in-process bus delivers nothing to anyone.
// Redis going away never blocks or fails the request path: publish() only queues, both
// connections reconnect by themselves, and errors are reported at most once a second per kind.
// Messages of the outage are lost on the bus (Postgres keeps them): the bus reports every place
// where it may have missed some (onGap) and the node reconciles with Postgres (api/app/reconcile.ts).
// One such place is a peer's death: a node SIGKILLed between a commit and the publish of its
// changes and events never announces them. Every node therefore says it is alive on the stream at
// least every HEARTBEAT_MS and says goodbye when it stops; a reader that has read everything up to
// PEER_LOST_MS past a peer's last entry, with no goodbye, reports a 'peer-lost' gap from there.
import type { Redis as RedisClient } from 'ioredis'
import type { EventEnvelope } from '../sql/vocabulary/event-envelope.js'
import type { OptOutMessage } from '../api/cpaas/sms/opt-out.js'

/** Why the bus may have lost messages: Redis reconnected, the stream was trimmed past this reader, a peer died. */
export type GapReason = 'reconnect' | 'trimmed' | 'peer-lost'

export type BusMessage =
  | { kind: 'session'; id: string; version: number }
  | { kind: 'tenant'; id: string }
  | { kind: 'event'; envelope: EventEnvelope }
  | OptOutMessage

export interface Bus {
  readonly kind: 'redis' | 'in-process'
  /**
   * Starts reading other nodes' messages (from the newest: what came before is in Postgres) and
   * announcing this node. The boot calls it once the engine holds what Postgres had; publishing
   * works before it.
   */
  start(): void
  publish(msgs: BusMessage[]): void
  /**
   * Resolves once what was published so far is in Redis (so a node that announced a change, e.g.
   * a key rotation, can answer after the other nodes could have read it). At once when Redis is
   * not connected: nothing waits for a reconnect.
   */
  settled(): Promise<void>
  /** Messages published by OTHER nodes. */
  onMessage(handler: (msg: BusMessage) => void): void
  /**
   * Messages may have been missed (docs/scaling.md): the reader reconnected (Redis restarted, perhaps
   * empty, or a partition), or the stream was trimmed past the last id it read (a paused node).
   * The handler reconciles from Postgres; reading goes on meanwhile. `heardUntil` (epoch ms, this
   * node's clock): the start of the last read that returned everything the stream then held, so
   * what was published before it was read; what was published after it may be lost (the replay of
   * events to WebSocket clients starts there, gateway/replay.ts). Reported before any entry read
   * after the gap is handed on, so a handler can hold those back behind what it replays.
   */
  onGap(handler: (reason: GapReason, heardUntil: number) => void): void
  /**
   * Resolves once every peer known now has written an entry that Redis stored after `since` (epoch
   * ms) or was taken for lost, or after `timeoutMs`. A resume waits for it before its seam: a
   * peer killed between its commit and its publish has its events in the outbox by then, and the
   * replay's pages send them in id order (gateway/stream/resume.ts).
   */
  peersHeard(since: number, timeoutMs: number): Promise<void>
  ping(): Promise<'ok' | 'down'>
  close(): Promise<void>
}

export function createInProcessBus(): Bus {
  return {
    kind: 'in-process',
    start() {},
    publish() {},
    async settled() {},
    onMessage() {},
    onGap() {},
    async peersHeard() {},
    async ping() { return 'ok' },
    async close() {},
  }
}

/**
 * The stream of the nodes that share one database (its instance id, sql/instance.ts): two
 * deployments on one Redis (staging and production, or every test service of a parallel suite)
 * never hear, reload for or get trimmed by each other's messages. BUS_STREAM overrides it (a rolling
 * upgrade from a release that used the one shared name `maskline:bus`, docs/scaling.md).
 */
export function busStreamName(databaseId: string): string {
  return `maskline:bus:${databaseId}`
}
const MAXLEN = 100_000
/**
 * A reader turn (XREAD BLOCK 1000 plus the handlers) longer than this means the process stalled
 * (SIGSTOP, a blocked event loop) or Redis was slow: the reader checks for a trim gap. Trimming
 * 100,000 entries past a reader within 2 s takes 50,000 messages a second, more than the stream
 * carries; a shorter pause that still misses messages is caught by the periodic sweep.
 */
const GAP_CHECK_MS = 2_000
const READ_COUNT = 500
/** Reconnect attempts at most this far apart, so the bus resumes soon after Redis returns. */
const RECONNECT_MAX_MS = 1_000
const REPORT_EVERY_MS = 1_000
/** A node with nothing to publish for this long says it is alive. */
export const HEARTBEAT_MS = 1_000
/**
 * A peer silent this long (measured against what this reader has read everything up to, so a
 * reader's own stall or outage never condemns its peers) is taken for dead. Well above a heartbeat:
 * a peer's event loop stalled for a few seconds costs a needless replay read, nothing else.
 */
export const PEER_LOST_MS = 5_000
// Bus-internal bodies, never handed to the handlers.
const ALIVE = '{"kind":"alive"}'
const BYE = '{"kind":"bye"}'

/** Stream ids ("ms-seq") in order: negative when a < b. */
export function compareStreamIds(a: string, b: string): number {
  const [am = 0, as = 0] = a.split('-').map(Number)
  const [bm = 0, bs = 0] = b.split('-').map(Number)
  return am !== bm ? am - bm : as - bs
}

export function createRedisBus(Redis: typeof RedisClient, opts: { url: string; nodeId: string; onError: (code: string) => void; stream: string; maxLen?: number; peerLostMs?: number }): Bus {
  const peerLostMs = opts.peerLostMs ?? PEER_LOST_MS
  const stream = opts.stream
  const maxLen = String(opts.maxLen ?? MAXLEN)
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
  const gapHandlers: Array<(reason: GapReason, heardUntil: number) => void> = []
  let heardUntil = Date.now()
  const gap = (reason: GapReason, from = heardUntil) => {
    for (const h of gapHandlers) {
      try { h(reason, from) } catch { onError('bus-gap-handler') }
    }
  }
  /**
   * Per peer node, its last entry: when this reader read it (this node's clock) and its stream id
   * (whose milliseconds say when Redis stored it: after that moment the peer was still alive).
   * Updated in place for every entry read.
   */
  const peers = new Map<string, { readAt: number; lastId: string }>()
  /** Peers silent past PEER_LOST_MS before what was read completely: each a 'peer-lost' gap from its last entry. */
  function checkPeers(): void {
    for (const [node, { readAt: at }] of peers) {
      if (heardUntil - at < peerLostMs) continue
      peers.delete(node) // its next entry, if it was only stalled, enrols it again
      gap('peer-lost', at)
    }
  }
  // The first 'ready' is the boot's (the reconciler starts from the boot load on its own); every
  // later one follows a lost connection, whose messages may be gone.
  let readyOnce = false
  let reconnected = false
  sub.on('ready', () => {
    if (readyOnce) reconnected = true
    readyOnce = true
  })
  let closed = false
  let pending: string[] = []
  let scheduled = false
  let lastFlush: Promise<unknown> = Promise.resolve()
  let lastPublish = 0

  function flush() {
    scheduled = false
    if (!pending.length) return
    const batch = pending
    pending = []
    lastPublish = performance.now()
    const p = pub.pipeline()
    for (const body of batch) p.xadd(stream, 'MAXLEN', '~', maxLen, '*', 'n', opts.nodeId, 'm', body)
    lastFlush = p.exec().catch(() => onError('redis-publish'))
  }

  /**
   * Where to read from after a reconnect or a long silence. A stream whose newest id is older than
   * the last one read is another stream (Redis restarted empty, written to since): read it all.
   * One whose oldest id is newer than the last one read lost entries we never saw (trimmed).
   */
  async function resumeFrom(last: string, afterReconnect: boolean): Promise<string> {
    if (last === '$') return last
    const newest = await sub.xrevrange(stream, '+', '-', 'COUNT', 1)
    const top = newest[0]?.[0]
    if (top === undefined || compareStreamIds(top, last) < 0) {
      if (!afterReconnect) gap('trimmed')
      return '0-0'
    }
    const oldest = (await sub.xrange(stream, '-', '+', 'COUNT', 1))[0]?.[0]
    if (!afterReconnect && oldest !== undefined && compareStreamIds(oldest, last) > 0) gap('trimmed')
    return last
  }

  async function readLoop() {
    let last = '$'
    let lastTurn = performance.now()
    while (!closed) {
      try {
        // A turn takes at most BLOCK (1 s) plus the handlers: a much longer one means the process
        // was paused (SIGSTOP, a stalled event loop) and the stream may have been trimmed past `last`.
        const t = performance.now()
        const stalled = t - lastTurn > GAP_CHECK_MS
        lastTurn = t
        if (reconnected) {
          reconnected = false
          gap('reconnect') // before reading on: what arrives from now on is read, the rest is reloaded
          // Peers' silence across this reader's own outage says nothing: they are judged from now.
          for (const p of peers.values()) p.readAt = Date.now()
          last = await resumeFrom(last, true)
        } else if (stalled) {
          last = await resumeFrom(last, false)
        }
        const readAt = Date.now()
        const res = await sub.xread('COUNT', READ_COUNT, 'BLOCK', 1000, 'STREAMS', stream, last) as Array<[string, Array<[string, string[]]>]> | null
        const full = (res?.[0]?.[1].length ?? 0) >= READ_COUNT
        // Paused while blocked, or a full batch (this reader is behind the writers): check next turn.
        if (performance.now() - t > GAP_CHECK_MS || full) lastTurn = -Infinity
        // Paused while blocked (SIGSTOP): the entries this read returned may follow a trim gap.
        // Reported before they are handed on, so the replay of what was lost goes out before them.
        if (performance.now() - t > GAP_CHECK_MS && last !== '$') {
          const oldest = (await sub.xrange(stream, '-', '+', 'COUNT', 1))[0]?.[0]
          if (oldest !== undefined && compareStreamIds(oldest, last) > 0) gap('trimmed')
        }
        if (!full) heardUntil = readAt // a read that returned all there was: nothing before it is missed
        const readTo = Date.now()
        for (const [, entries] of res ?? []) {
          for (const [id, fields] of entries) {
            last = id
            const node = fields[1]
            if (node === opts.nodeId || node === undefined) continue
            const body = fields[3] ?? ''
            if (body === BYE) { peers.delete(node); continue }
            const peer = peers.get(node)
            if (peer) { peer.readAt = readTo; peer.lastId = id } else peers.set(node, { readAt: readTo, lastId: id })
            if (body === ALIVE) continue
            let msg: BusMessage
            try { msg = JSON.parse(body) } catch { continue }
            for (const h of handlers) h(msg)
          }
        }
        checkPeers()
      } catch {
        if (closed) return
        onError('redis-read')
        await new Promise(r => setTimeout(r, 500))
      }
    }
  }
  let heartbeat: NodeJS.Timeout | undefined

  return {
    kind: 'redis',
    start() {
      if (heartbeat || closed) return
      heardUntil = Date.now()
      void readLoop()
      heartbeat = setInterval(() => {
        if (performance.now() - lastPublish < HEARTBEAT_MS || pub.status !== 'ready') return
        pending.push(ALIVE)
        flush()
      }, HEARTBEAT_MS / 2)
      heartbeat.unref()
    },
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
    onGap(h) { gapHandlers.push(h) },
    async peersHeard(since, timeoutMs) {
      // Stored after `since` by Redis's clock (a read after `since` could be of an entry the peer
      // wrote before it died); a clock of Redis behind this node's costs a wait up to the timeout.
      const storedAt = (id: string) => Number(id.slice(0, id.indexOf('-')))
      const alive = (node: string) => { const p = peers.get(node); return p === undefined || storedAt(p.lastId) > since } // heard, or lost
      const waiting = [...peers.keys()].filter(node => !alive(node))
      for (const end = Date.now() + timeoutMs; waiting.some(node => !alive(node)) && !closed && Date.now() < end;) {
        await new Promise(r => setTimeout(r, 50))
      }
    },
    async ping() {
      if (pub.status !== 'ready') return 'down' // never wait for a reconnect
      try { return (await pub.ping()) === 'PONG' ? 'ok' : 'down' } catch { return 'down' }
    },
    async close() {
      closed = true
      clearInterval(heartbeat)
      pending.push(BYE) // after everything this node published: its peers replay nothing for it
      flush()
      sub.disconnect()
      if (pub.status === 'ready') await pub.quit().catch(() => pub.disconnect())
      else pub.disconnect()
    },
  }
}

/** ioredis is loaded only with a REDIS_URL: importing it costs ~0.3 s of a boot (bench/RESULTS.md, "What moved the figures", 18465a9). */
export async function createBus(opts: { redisUrl: string | undefined; nodeId: string; stream: string; onError: (code: string) => void; maxLen?: number }): Promise<Bus> {
  return opts.redisUrl
    ? createRedisBus((await import('ioredis')).Redis, { url: opts.redisUrl, nodeId: opts.nodeId, stream: opts.stream, onError: opts.onError, ...(opts.maxLen ? { maxLen: opts.maxLen } : {}) })
    : createInProcessBus()
}
