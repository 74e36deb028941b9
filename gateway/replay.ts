// Replays to this node's WebSocket clients the events the bus lost (docs/scaling.md). The bus is a live
// feed: what other nodes published while Redis was down, while this node was cut off from it, or
// while it was paused past the stream's trim, never arrives. Every event is in the outbox (written
// in the transaction of its change, sql/outbox.ts), so when the bus reports a gap this node reads
// the outbox from where it last heard the bus, less a margin, and delivers what it has not.
// - Which gaps: Redis reconnected, the stream was trimmed past this node, or a peer was lost (killed
//   between a commit and its publish: gateway/bus.ts, PEER_LOST_MS), whose events come late.
// - Where from: `heardUntil` (gateway/bus.ts: the start of the last read that returned all the
//   stream held; for a lost peer, its last entry) less SKEW_MS, never before this node started.
//   Event ids are UUIDv7 minted from the clock of the node that made
//   the event, and a publish lands on the stream a little after its id was minted: an event of
//   another node whose id is up to SKEW_MS older than this node's clock says is still replayed.
// - Exactly once: every event delivered here (this node's own, the bus's, the replay's) is
//   remembered by id in a bounded two-generation map (engine/recent.ts, at least REMEMBER / 2
//   newest ids); a replayed event remembered is skipped. So what this node made itself while
//   Redis was down, which its own clients got at once, is not sent twice.
// - Per-session order: the replay reads in id order (so each session's events in their order), and
//   while it runs, live events (this node's and the bus's) are held and delivered after it, those
//   the replay already sent dropped. After a reconnect the hold lasts until a second read
//   TRAILING_MS later (a publisher that reconnected after this node lost what it published in
//   between, and those events would otherwise come after its newer live ones). Not avoidable: a
//   session changed elsewhere and then on this node during the gap (its commands are decided by
//   Postgres, so this node reloaded the other's change first) has the other node's older event
//   delivered late, after this node's own newer one; the envelope's id and createdAt tell.
// - Bounds: a replay reads BATCH rows a page, yielding between pages (uWS writes out; a client
//   still too slow is closed at its 1 MiB backpressure limit, gateway/stream/stream.ts), at most
//   MAX_EVENTS rows and never further back than MAX_WINDOW_MS: a longer gap loses the older events
//   (logged). Only tenants with a client on this node are read; no client, no read.
// - Retention: the outbox is the source; rows purged or never kept are not replayed. A replay
//   that fails (Postgres away) is retried RETRY_MS later, a few times, then given up (logged).
// Nothing here logs an envelope: ids and counts only.
import type { Logger } from 'pino'
import type { EventEnvelope } from '../sql/vocabulary/event-envelope.js'
import { Recent } from '../engine/recent.js'
import { floorId, outboxEventsAfter } from '../sql/outbox.js'
import type { Db } from '../sql/transaction.js'
import type { GapReason } from './bus.js'

/** Margin below `heardUntil` (clock skew between nodes, publish latency). */
export const SKEW_MS = 5_000
/** Never replay further back than this: an outage longer than it loses its older events. */
export const MAX_WINDOW_MS = 10 * 60_000
const BATCH = 500
/** Rows read per replay at most (a flood of old events helps no client). */
const MAX_EVENTS = 50_000
/** Event ids remembered (at least half of them, the newest): the exactly-once window. */
const REMEMBER = 200_000
/** Live events held while a replay runs, at most; past it they go out at once (order may suffer). */
const MAX_HELD = 20_000
/** After a reconnect, a second read this much later (publishers still reconnecting). */
const TRAILING_MS = 3_000
const RETRY_MS = 5_000
const RETRIES = 5

export interface ReplayDeps {
  db: Db
  /** Hands one event to this node's WebSocket clients. */
  publish: (e: EventEnvelope) => void
  /** Tenants with a client on this node now. */
  tenants: () => readonly string[]
  log: Pick<Logger, 'info' | 'warn'>
  now?: () => number
  skewMs?: number
  maxWindowMs?: number
  trailingMs?: number
}

export function createReplayer(d: ReplayDeps) {
  const now = d.now ?? Date.now
  const skewMs = d.skewMs ?? SKEW_MS
  const maxWindowMs = d.maxWindowMs ?? MAX_WINDOW_MS
  const trailingMs = d.trailingMs ?? TRAILING_MS
  // What was published before this node listened is not its to replay: its clients got those
  // events elsewhere or from a resume's pages, and `delivered` cannot tell (a lost peer's gap, from
  // its last entry less the skew, reaches back before a node that started a moment ago).
  const startedAt = now()
  // Kept at least as long as a replay can reach back (its window and the skew): engine/recent.ts.
  const delivered = new Recent<true>(REMEMBER, { maxAgeMs: 2 * (maxWindowMs + skewMs), now })
  /** Live events held while a replay runs (null: none runs). */
  let held: EventEnvelope[] | null = null
  /** The earliest `heardUntil` of the gaps not replayed yet. */
  let pendingFrom: number | null = null
  let trailing = false
  let running: Promise<void> | null = null
  let closed = false
  const timers = new Set<NodeJS.Timeout>()

  /** Delivers `e` unless it was delivered before; true when it went out now. */
  function send(e: EventEnvelope): boolean {
    if (delivered.get(e.id)) return false
    delivered.set(e.id, true)
    d.publish(e)
    return true
  }

  function release(): void {
    const h = held
    held = null
    for (const e of h ?? []) send(e)
  }

  /** One read of the outbox from `fromMs` (less the margin) to its end. */
  async function replayOnce(fromMs: number): Promise<void> {
    const t0 = performance.now()
    const floor = Math.max(fromMs - skewMs, now() - maxWindowMs, startedAt)
    if (fromMs - skewMs < floor && floor !== startedAt) d.log.warn({ code: 'replay-window', lostMs: Math.round(floor - (fromMs - skewMs)) }, 'bus gap longer than the replay window: older events not replayed')
    let after = floorId(floor)
    let read = 0
    let sent = 0
    for (;;) {
      const tenants = d.tenants()
      if (tenants.length === 0) break
      const page = await outboxEventsAfter(d.db, after, tenants, BATCH)
      for (const e of page) {
        after = e.id
        if (send(e)) sent++
      }
      read += page.length
      if (page.length < BATCH) break
      if (read >= MAX_EVENTS) { d.log.warn({ code: 'replay-truncated', read }, 'replay stopped at its bound'); break }
      await new Promise(r => setImmediate(r)) // let the sockets write out between pages
    }
    d.log.info({ read, sent, fromMs: Math.round(floor), ms: Math.round(performance.now() - t0) }, 'replayed events from the outbox')
  }

  function later(ms: number, fn: () => void): void {
    const t = setTimeout(() => { timers.delete(t); fn() }, ms)
    t.unref()
    timers.add(t)
  }

  /** Replays while gaps are pending, then releases the live events held meanwhile. */
  function run(): void {
    if (running || closed) return
    running = (async () => {
      let failures = 0
      while (pendingFrom !== null && !closed) {
        const from = pendingFrom
        pendingFrom = null
        try {
          await replayOnce(from)
          failures = 0
        } catch {
          d.log.warn({ code: 'replay' }, 'recoverable error')
          pendingFrom = Math.min(pendingFrom ?? from, from)
          if (++failures > RETRIES) { d.log.warn({ code: 'replay-given-up' }, 'events of the bus gap not replayed'); pendingFrom = null; break }
          release() // Postgres away: the live feed is not held up for it
          await new Promise(r => later(RETRY_MS, () => r(undefined)))
          held ??= []
          continue
        }
        if (trailing && pendingFrom === null) {
          trailing = false
          pendingFrom = from
          await new Promise(r => later(trailingMs, () => r(undefined)))
        }
      }
    })()
    void running.finally(() => {
      running = null
      release()
      if (pendingFrom !== null) { held = []; run() } // a gap reported as it ended
    })
  }

  return {
    /** An event for this node's clients (made here or read from the bus). */
    deliver(e: EventEnvelope): void {
      if (held && held.length < MAX_HELD) { held.push(e); return }
      if (held) release() // too many held: out they go, in the order they came
      send(e)
    },
    /** The bus may have lost what was published after `heardUntil` (epoch ms). */
    gap(reason: GapReason, heardUntil: number): void {
      if (closed) return
      pendingFrom = Math.min(pendingFrom ?? heardUntil, heardUntil)
      if (reason === 'reconnect') trailing = true
      held ??= []
      run()
    },
    /** Resolves when no replay runs (tests). */
    async idle(): Promise<void> { await running },
    close(): void {
      closed = true
      for (const t of timers) clearTimeout(t)
      release()
    },
  }
}

export type Replayer = ReturnType<typeof createReplayer>
