// One socket's resume (`GET /v1/stream?after=<id>`): every event of its tenant (and `types`) with an
// id above `after`, read from the outbox in id order, then the live feed, each event once.
// - Cursor: the last id sent. Replay pages read `id > cursor AND id < floorId(now - settleMs)`:
//   older ids are settled (gateway/stream/settle.ts: an event not committed by then is "late" and
//   handled below); younger ones reach the socket through the live feed.
// - Seam: from the socket's open, every live event released for it is kept in `pending` (bounded:
//   past MAX_PENDING the socket is closed with the resync code, its client reads the REST API). When
//   a page comes back short the replay is done: pending events above the cursor are sent, in id
//   order, and the socket subscribes to its topics, in one synchronous turn, so nothing falls
//   between. An on-time pending event at or below the cursor was committed before the page that
//   covered its id was read (its id is older than that read's `now - settleMs`), so it was sent by
//   the replay: it is dropped, not sent twice.
// - A late event (released after its settle time) may have committed after the page covering its
//   id was read. If the cursor is already past it when it comes, the socket is closed with the
//   resync code; otherwise it is watched: the page that takes the cursor past it must hold it.
// - A peer killed between its commit and its publish (gateway/bus.ts): its clients reconnect here
//   at once, and its unpublished events would come through no live feed. Before its seam the
//   resume waits until every other node has been heard from since the socket opened, or taken for
//   lost (PEER_LOST_MS), then reads on: those events are in the outbox and go out in id order.
// - Tail: the gap replay of that lost peer (gateway/replay.ts) then sends them late to the live
//   sockets. The ids the pages sent within TAIL_MS before their bound are skipped as late events,
//   during the replay and for TAIL_MS after the seam.
// - Pacing: a page is sent corked, then the next is read only once uWS has written the socket's
//   buffer down below LOW_WATER (the drain callback), so a backlog of any size never holds more
//   than a page and LOW_WATER in memory, and each page is a turn of the event loop of its own.
import type { EventEnvelope } from '../../sql/vocabulary/event-envelope.js'
import { floorId } from '../../sql/outbox.js'
import { idTime } from './settle.js'

export const RESYNC_CODE = 4410
export const RESYNC_REASON = 'resync_required'
/** Rows read per page. */
const PAGE = 500
/** Bytes the socket may have buffered before the next page is read (a page is ~200 KB). */
const LOW_WATER = 256 * 1024
/** Live events held per socket while it replays. */
export const MAX_PENDING = 10_000
/**
 * The tail of a replay remembered past the seam: a lost peer is replayed from its last entry less
 * the replay's skew (5 s), PEER_LOST_MS (5 s) after it, so an event a page sent may come again late
 * up to ~12 s after the page's bound; 15 s covers that with a margin.
 */
export const TAIL_MS = 15_000

export interface ReplaySource {
  /** Whether the tenant's outbox holds the event `id`. */
  exists(tenantId: string, id: string): Promise<boolean>
  /** Up to `limit` events of the tenant (of `types`, when given) with afterId < id < beforeId, in id order, as JSON text. */
  page(q: { tenantId: string; afterId: string; beforeId: string; types: readonly string[] | null; limit: number }): Promise<Array<{ id: string; json: string }>>
}

export interface ResumeSocket {
  /** Sends frames corked, in order. */
  sendAll(frames: readonly string[]): void
  buffered(): number
  /** Closes the socket (RESYNC_CODE: the client reads the REST API, then connects without `after`). */
  end(code: number, reason: string, why: string): void
  /** Subscribes to the live topics (after the seam); `tail`: the ids the replay sent within TAIL_MS of its bound. */
  goLive(tail: ReadonlySet<string>): void
  isClosed(): boolean
}

export interface ResumeDeps {
  source: ReplaySource
  settleMs: number
  /** How far back `after` may be (STREAM_REPLAY_HOURS). */
  windowMs: number
  now: () => number
  onError: (err: unknown) => void
  /**
   * Awaited once, when the pages first come back short: the seam waits until every other node has
   * been heard from since the socket opened, or taken for lost (gateway/bus.ts peersHeard), then
   * the pages go on. A node killed between its commit and its publish never announces those
   * events; by then they are in the outbox and the pages send them in id order.
   */
  beforeSeam?: () => Promise<void>
}

interface Pending { id: string; json: string; late: boolean }

export interface Resume {
  readonly tenantId: string
  readonly types: ReadonlySet<string> | null
  /** A live event of the tenant, released by the settler while this socket replays. */
  live(e: EventEnvelope, json: string, late: boolean): void
  /** uWS wrote the socket's buffer out. */
  drained(): void
  /** Runs the replay to the seam (or to a close). */
  run(): Promise<void>
  /** Events sent by the replay so far (tests, logs). */
  readonly replayed: number
}

export function createResume(ws: ResumeSocket, tenantId: string, after: string, types: readonly string[] | null, d: ResumeDeps): Resume {
  let cursor = after
  let replayed = 0
  let pending: Pending[] = []
  /** Late events above the cursor when they came: the page that passes them must hold them. */
  let watch: string[] = []
  /** Ids sent by the pages within TAIL_MS of the newest page's bound, inserted (so iterated) in id order. */
  const tail = new Set<string>()
  let waited = false
  let wake: (() => void) | null = null
  let done = false
  const typeSet = types ? new Set<string>(types) : null

  const stop = (why: string, code = RESYNC_CODE, reason = RESYNC_REASON) => { done = true; if (!ws.isClosed()) ws.end(code, reason, why) }

  async function writable(): Promise<void> {
    if (ws.buffered() <= LOW_WATER) return new Promise(r => setImmediate(r))
    return new Promise(r => { wake = () => { wake = null; r() } })
  }

  return {
    tenantId,
    types: typeSet,
    get replayed() { return replayed },
    live(e, json, late) {
      if (done) return
      if (late && e.id <= cursor && tail.has(e.id)) return // a lost peer's event the pages sent
      if (late && e.id <= cursor) return stop('late event behind the replay cursor')
      if (late) watch.push(e.id)
      if (pending.length >= MAX_PENDING) return stop('live events overflowed during replay')
      pending.push({ id: e.id, json, late })
    },
    drained() { wake?.() },
    async run() {
      try {
        if (idTime(after) < d.now() - d.windowMs) return stop('cursor older than the replay window')
        if (!(await d.source.exists(tenantId, after))) return stop('unknown event id')
        for (;;) {
          if (done || ws.isClosed()) return
          const bound = d.now() - d.settleMs
          const rows = await d.source.page({ tenantId, afterId: cursor, beforeId: floorId(bound), types, limit: PAGE })
          if (done || ws.isClosed()) return
          if (rows.length) {
            for (const r of rows) if (idTime(r.id) >= bound - TAIL_MS) tail.add(r.id)
            for (const id of tail) {
              if (idTime(id) >= bound - TAIL_MS) break
              tail.delete(id)
            }
            const ids = watch.length ? new Set(rows.map(r => r.id)) : null
            ws.sendAll(rows.map(r => r.json))
            replayed += rows.length
            cursor = rows[rows.length - 1]!.id
            if (ids) {
              if (watch.some(id => id <= cursor && !ids.has(id))) return stop('late event committed behind the replay cursor')
              watch = watch.filter(id => id > cursor)
            }
            pending = pending.filter(p => p.id > cursor)
          }
          if (rows.length < PAGE) {
            if (!d.beforeSeam || waited) break
            waited = true
            await d.beforeSeam()
            continue
          }
          await writable()
        }
        // The seam: one synchronous turn from the last page to the live topics.
        const rest = pending.filter(p => p.id > cursor).sort((a, b) => (a.id < b.id ? -1 : 1))
          .filter((p, i, all) => i === 0 || all[i - 1]!.id !== p.id)
        pending = []
        done = true
        if (ws.isClosed()) return
        ws.sendAll(rest.map(p => p.json))
        ws.goLive(tail)
      } catch (err) {
        d.onError(err)
        // Postgres away: the same cursor will do once it is back (1011, the client reconnects).
        stop('replay failed', 1011, 'replay_failed')
      }
    },
  }
}
