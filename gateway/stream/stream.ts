// GET /v1/stream (contract D6): a WebSocket of the caller's tenant's event envelopes, every type
// (session.target_swapped included), optionally filtered with `?types=a,b`. Authenticated in
// `upgrade` before the socket exists; each socket subscribes to its tenant's topic (or to one
// topic per requested type) and events fan out with `app.publish`: one serialization per event,
// the loop over sockets stays in C++. Slow consumers are closed at the backpressure limit so
// they never hold memory or slow the others. Events go out in id order, each held STREAM_SETTLE_MS
// (gateway/stream/settle.ts), so a client's last id is a sound cursor for `?after=<id>`, which
// replays the outbox before going live (gateway/stream/resume.ts; docs/api.md, "WebSocket stream").
import type { HttpRequest, HttpResponse, TemplatedApp, us_socket_context_t, WebSocket } from 'uWebSockets.js'
import type { Logger } from 'pino'
import type { EventEnvelope, EventType } from '../../sql/vocabulary/event-envelope.js'
import { EVENT_TYPES } from '../../sql/vocabulary/event-envelope.js'
import { renderProblem, type FieldIssue, type ProblemSlug } from '../../api/problems.js'
import { statusLine } from '../http/respond.js'
import { extractToken, type StreamPrincipal } from './auth.js'
import { deferredUpgrades } from './deferred-upgrades.js'
import { UUID_RE } from '../../sql/vocabulary/ids.js'
import { createSettler, idTime } from './settle.js'
import { createResume, RESYNC_CODE, RESYNC_REASON, TAIL_MS, type ReplaySource, type Resume } from './resume.js'

const STREAM_PATH = '/v1/stream'
/** Every type the stream carries: the nine subscribable ones and session.target_swapped. */
const STREAM_EVENT_TYPES: readonly EventType[] = EVENT_TYPES

// uWS pings after idleTimeout minus a margin of client silence and closes the socket if the
// pong does not come back within the margin: 46 s gives a ping after 30 s (margin 16 s).
const IDLE_TIMEOUT_SECONDS = 46

const tenantTopic = (tenantId: string): string => `tenant/${tenantId}`
const typeTopic = (tenantId: string, type: string): string => `tenant/${tenantId}/${type}`

interface SocketData {
  tenantId: string
  topics: string[]
  /** `?after=`: the socket replays from this id before it goes live. */
  after: string | null
  types: EventType[] | null
  resume?: Resume
  /** After a resume, for TAIL_MS: the ids its replay's last pages sent, skipped as late events (gateway/stream/resume.ts). */
  replayTail?: ReadonlySet<string>
  closed?: boolean
  expMs: number | undefined
  expiryTimer?: NodeJS.Timeout
  /** performance.now() at open: how long a socket lived, for the abnormal-close line. */
  openedAt?: number
}

/**
 * A socket that uWS closed without a close frame (1006) this soon after it opened is logged with
 * uWS's own reason (its close message: "Received too big message", a protocol error, ...). Test
 * runs used to see a client dropped this way a few ms after the upgrade with no reason at all:
 * uWS's cork() after an async upgrade (gateway/stream/deferred-upgrades.ts). The line stays, so
 * that any other early drop is seen with what uWS says of it.
 */
const EARLY_ABNORMAL_CLOSE_MS = 1_000

export interface StreamOptions {
  /** Synchronous when it can be (a cached token of a tenant in memory): the upgrade is then immediate. */
  verifyTenantToken: (token: string) => StreamPrincipal | Promise<StreamPrincipal>
  /** This listener's base URL once bound (null before): a handshake decided later is upgraded through it. */
  selfUrl: () => string | null
  log: Pick<Logger, 'debug' | 'info' | 'warn' | 'error'>
  /** Bytes buffered per socket before it is closed (contract D6: 1 MiB). */
  maxBackpressure?: number
  /** The `{base_url}` of problem `type` URIs on a refused handshake, read when one is refused. */
  publicBaseUrl?: () => string
  /** Clock for token expiry (epoch ms). */
  now?: () => number
  /** Told of every client closed, with its close code (metrics). */
  onClose?: (code: number) => void
  /** The outbox a resume (`?after=`) replays from; without it `after` closes with the resync code. */
  replay?: ReplaySource
  /** Resolves once every other node was heard from since `since`, or lost (gateway/bus.ts peersHeard); single node: absent. */
  peersHeard?: (since: number) => Promise<void>
  /** How long a live event is held to be released in id order (gateway/stream/settle.ts). Default 1000. */
  settleMs?: number
  /** How far back `after` may reach (STREAM_REPLAY_HOURS). Default 24 h. */
  replayWindowMs?: number
}

export const DEFAULT_SETTLE_MS = 1_000

export interface Stream {
  /** Fans one committed event out to its tenant's sockets on this node. */
  publishEvent(envelope: EventEnvelope): void
  connectionCount(): number
  /** Handshakes upgraded after an await, through the drain request (gateway/stream/deferred-upgrades.ts). */
  deferredUpgrades(): number
  /** Tenants with a client on this node (docs/scaling.md: what a replay of missed events reads). */
  tenantIds(): string[]
  /** Closes every socket (1001 going away), e.g. before the listen socket closes. */
  closeAll(): void
}

/**
 * Publishes on `tenant/<id>` and `tenant/<id>/<type>`; a socket is on one or the other, never both.
 * `sentUpTo` (per topic, the largest id published) drops the same id sent again; a late event
 * (smaller than it) still goes out, behind.
 */
export function publishEvent(app: TemplatedApp, envelope: EventEnvelope, json?: string, sentUpTo?: Map<string, string>): void {
  const all = tenantTopic(envelope.data.tenantId)
  const typed = typeTopic(envelope.data.tenantId, envelope.type)
  for (const topic of [all, typed]) {
    if (app.numSubscribers(topic) === 0) continue
    const last = sentUpTo?.get(topic)
    if (last === envelope.id) continue // sent already: once is enough
    if (last === undefined || envelope.id > last) sentUpTo?.set(topic, envelope.id)
    app.publish(topic, json ??= JSON.stringify(envelope))
  }
}

function parseAfter(rawQuery: string): { ok: true; after: string | null } | { ok: false; issue: FieldIssue } {
  const raw = new URLSearchParams(rawQuery).getAll('after')
  if (raw.length === 0) return { ok: true, after: null }
  if (raw.length > 1 || !UUID_RE.test(raw[0]!)) return { ok: false, issue: { field: 'after', issue: 'invalid_event_id' } }
  return { ok: true, after: raw[0]!.toLowerCase() }
}

function parseTypes(rawQuery: string): { ok: true; types: EventType[] | null } | { ok: false; issue: FieldIssue } {
  const q = new URLSearchParams(rawQuery)
  const raw = q.getAll('types')
  if (raw.length === 0) return { ok: true, types: null }
  const names = raw.flatMap(v => v.split(',')).map(s => s.trim())
  if (names.length === 0 || names.some(n => !(STREAM_EVENT_TYPES as readonly string[]).includes(n))) {
    return { ok: false, issue: { field: 'types', issue: 'unknown_event_type' } }
  }
  return { ok: true, types: [...new Set(names)] as EventType[] }
}

export function registerStream(app: TemplatedApp, opts: StreamOptions): Stream {
  const { log } = opts
  const baseUrl = opts.publicBaseUrl ?? (() => '')
  const now = opts.now ?? Date.now
  const sockets = new Set<WebSocket<SocketData>>()
  const later = deferredUpgrades(app, opts.selfUrl)
  const settleMs = opts.settleMs ?? DEFAULT_SETTLE_MS
  const replayWindowMs = opts.replayWindowMs ?? 24 * 3_600_000
  const byTenant = new Map<string, Set<WebSocket<SocketData>>>()
  /** Per topic with subscribers, the largest id published (publishEvent). */
  const sentUpTo = new Map<string, string>()
  /**
   * Per tenant, the late events seen (the newest arrival, the smallest id): a client that left
   * before one came and resumes past its id would never get it, so such a resume is refused.
   * Memory of this node's lifetime, one entry per tenant.
   */
  const lateMarks = new Map<string, { at: number; minId: string }>()

  const resync = (ws: WebSocket<SocketData>, why: string) => {
    const data = ws.getUserData()
    if (data.closed) return
    log.info({ code: 'stream-resync', tenantId: data.tenantId, why }, 'stream client told to resynchronise')
    ws.end(RESYNC_CODE, RESYNC_REASON)
  }

  /** A settled event (gateway/stream/settle.ts) to the topics' sockets and to the tenant's replaying sockets. */
  function release(e: EventEnvelope, late: boolean): void {
    const tenantId = e.data.tenantId
    if (late) {
      log.debug({ code: 'stream-late-event', tenantId, lateMs: Date.now() - idTime(e.id) }, 'stream event committed after its settle time')
      const mark = lateMarks.get(tenantId)
      lateMarks.set(tenantId, { at: Date.now(), minId: mark && mark.minId < e.id ? mark.minId : e.id })
    }
    const mine = byTenant.get(tenantId)
    if (!mine) return
    const json = JSON.stringify(e)
    // A late event goes to the live sockets at once, behind ids they already have: closing them
    // would turn every bus gap (a Redis restart, replayed by gateway/replay.ts) into a resync of
    // every client. Their cursor is the largest id they processed; a client that left before the
    // late event came is refused when it resumes past it (lateMarks, startResume). A socket whose
    // resume sent it a moment ago (a lost peer's event, read from the outbox by both) is skipped.
    if (late && [...mine].some(ws => ws.getUserData().replayTail?.has(e.id))) {
      const topic = (d: SocketData) => (d.types ? typeTopic(tenantId, e.type) : tenantTopic(tenantId))
      for (const ws of mine) {
        const data = ws.getUserData()
        if (!data.closed && !data.replayTail?.has(e.id) && ws.isSubscribed(topic(data))) ws.send(json, false)
      }
    } else {
      publishEvent(app, e, json, sentUpTo)
    }
    for (const ws of mine) {
      const r = ws.getUserData().resume
      if (r && (!r.types || r.types.has(e.type))) r.live(e, json, late)
    }
  }
  const settler = createSettler({ settleMs, now: Date.now, release }) // the clock ids are minted with

  function startResume(ws: WebSocket<SocketData>, data: SocketData, after: string): void {
    const openedAt = Date.now()
    const mark = lateMarks.get(data.tenantId)
    // The frame `after` cannot have reached the client before its id's time: a late event that
    // came since then, with a smaller id, may have been missed.
    // A close from inside uWS's open callback never reaches the client: every refusal and the
    // replay start a turn later (the resume is registered now, so no live event is missed).
    if (!opts.replay || (mark && mark.at >= idTime(after) && mark.minId < after)) {
      setImmediate(() => resync(ws, opts.replay ? 'late event since the cursor' : 'no replay source'))
      return
    }
    const resume = data.resume = createResume({
      sendAll(frames) { if (!data.closed) ws.cork(() => { for (const f of frames) ws.send(f, false) }) },
      buffered: () => (data.closed ? 0 : ws.getBufferedAmount()),
      end(code, reason, why) {
        if (code === RESYNC_CODE) return resync(ws, why)
        if (!data.closed) ws.end(code, reason)
      },
      goLive(tail) {
        data.resume = undefined
        for (const topic of data.topics) ws.subscribe(topic)
        if (tail.size) {
          data.replayTail = tail
          setTimeout(() => { data.replayTail = undefined }, TAIL_MS).unref()
        }
      },
      isClosed: () => data.closed === true,
    }, data.tenantId, after, data.types, {
      source: opts.replay, settleMs, windowMs: replayWindowMs, now: Date.now,
      ...(opts.peersHeard ? { beforeSeam: () => opts.peersHeard!(openedAt) } : {}),
      onError: err => log.warn({ err, code: 'stream-replay' }, 'recoverable error'),
    })
    setImmediate(() => { void resume.run() })
  }

  function refuse(res: HttpResponse, slug: ProblemSlug, detail?: string, errors?: FieldIssue[]): void {
    const doc = renderProblem(baseUrl(), slug, detail, errors)
    res.writeStatus(statusLine(doc.status))
    res.writeHeader('content-type', 'application/problem+json')
    if (slug === 'unauthorized') res.writeHeader('www-authenticate', 'Bearer')
    if (slug === 'unavailable') res.writeHeader('retry-after', '1')
    res.end(JSON.stringify(doc), true)
    if (slug === 'internal') log.error({ instance: doc.instance }, 'stream handshake failed')
  }

  app.ws<SocketData>(STREAM_PATH, {
    compression: 0,
    maxPayloadLength: 1024, // clients have nothing to say; close frames and pongs fit
    idleTimeout: IDLE_TIMEOUT_SECONDS,
    sendPingsAutomatically: true,
    maxBackpressure: opts.maxBackpressure ?? 1024 * 1024,
    // typed as a number in this build's index.d.ts; the binding reads it as a boolean
    closeOnBackpressureLimit: true as unknown as number,

    upgrade(res: HttpResponse, req: HttpRequest, context: us_socket_context_t) {
      // style 6: everything out of req before the first await; req is stack-allocated.
      const authorization = req.getHeader('authorization')
      const secKey = req.getHeader('sec-websocket-key')
      const secProtocol = req.getHeader('sec-websocket-protocol')
      const secExtensions = req.getHeader('sec-websocket-extensions')
      const rawQuery = req.getQuery() ?? ''
      let aborted = false
      res.onAborted(() => { aborted = true })

      const types = parseTypes(rawQuery)
      if (!types.ok) { refuse(res, 'validation', 'types must name stream event types', [types.issue]); return }
      const after = parseAfter(rawQuery)
      if (!after.ok) { refuse(res, 'validation', 'after must be the id (a UUID) of an event of the stream', [after.issue]); return }
      const { token, protocol } = extractToken(authorization, secProtocol)
      if (!token) { refuse(res, 'unauthorized', 'a tenant or dashboard token is required on the handshake'); return }

      /**
       * The handshake's answer, given in a uWS callback: this upgrade's own (uWS has the socket
       * corked, so res.cork only runs `fn`) or the drain request's (another socket corked). Never
       * `res.cork(() => res.upgrade(...))` from a promise: see gateway/stream/deferred-upgrades.ts.
       */
      const answer = (principal: StreamPrincipal): void => {
        res.cork(() => {
          if (principal === null) return refuse(res, 'unauthorized')
          if (principal === 'forbidden') return refuse(res, 'forbidden', 'the tenant is suspended')
          const { tenantId } = principal
          const topics = types.types ? types.types.map(t => typeTopic(tenantId, t)) : [tenantTopic(tenantId)]
          res.upgrade<SocketData>({ tenantId, topics, expMs: principal.expMs, after: after.after, types: types.types }, secKey, protocol, secExtensions, context)
        })
      }
      const failed = (err: unknown) => {
        log.error({ err }, 'stream token check failed')
        if (!aborted) res.cork(() => refuse(res, 'internal'))
      }

      let verdict: StreamPrincipal | Promise<StreamPrincipal>
      try {
        verdict = opts.verifyTenantToken(token)
      } catch (err) {
        return failed(err)
      }
      if (!(verdict instanceof Promise)) return answer(verdict)
      verdict.then(
        principal => {
          if (aborted) return
          // A refusal writes an answer and no socket changes hands: it may go out from here.
          if (principal === null || principal === 'forbidden') return answer(principal)
          later.defer(
            () => { if (!aborted) answer(principal) },
            () => { if (!aborted) res.cork(() => refuse(res, 'unavailable', 'the node is shutting down; connect again')) },
          )
        },
        failed,
      )
    },

    open(ws: WebSocket<SocketData>) {
      const data = ws.getUserData()
      data.openedAt = performance.now()
      sockets.add(ws)
      const mine = byTenant.get(data.tenantId)
      if (mine) mine.add(ws); else byTenant.set(data.tenantId, new Set([ws]))
      if (data.after === null) for (const topic of data.topics) ws.subscribe(topic)
      // A token is good for 900 s; the stream does not outlive it (the client reconnects with a fresh one).
      if (data.expMs !== undefined) {
        const ms = Math.max(0, data.expMs - now())
        data.expiryTimer = setTimeout(() => { if (!data.closed) ws.end(1008, 'token expired') }, Math.min(ms, 2 ** 31 - 1))
        data.expiryTimer.unref()
      }
      log.debug({ tenantId: data.tenantId }, 'stream open')
      if (data.after !== null) startResume(ws, data, data.after) // last: it may close the socket at once
    },

    message() {
      // Nothing is expected from clients; ignoring keeps a chatty client harmless.
    },

    drain(ws: WebSocket<SocketData>) {
      ws.getUserData().resume?.drained()
    },

    close(ws: WebSocket<SocketData>, code: number, message: ArrayBuffer) {
      const data = ws.getUserData()
      data.closed = true
      if (data.expiryTimer) clearTimeout(data.expiryTimer)
      sockets.delete(ws)
      if (data.resume) data.resume.drained() // its replay, waiting for a drain, sees the close
      const mine = byTenant.get(data.tenantId)
      mine?.delete(ws)
      if (mine?.size === 0) {
        byTenant.delete(data.tenantId)
        for (const topic of [tenantTopic(data.tenantId), ...STREAM_EVENT_TYPES.map(ty => typeTopic(data.tenantId, ty))]) sentUpTo.delete(topic)
      }
      opts.onClose?.(code)
      const livedMs = data.openedAt === undefined ? null : Math.round(performance.now() - data.openedAt)
      if (code === 1006 && livedMs !== null && livedMs < EARLY_ABNORMAL_CLOSE_MS) {
        // uWS's reason is its own text (never client data); bounded all the same.
        const reason = Buffer.from(message).toString('utf8', 0, Math.min(message.byteLength, 120))
        log.warn({ code: 'stream-early-close', closeCode: code, reason, livedMs, tenantId: data.tenantId, sockets: sockets.size }, 'stream closed without a close frame right after opening')
      }
      log.debug({ tenantId: data.tenantId, code }, 'stream closed')
    },
  })

  return {
    publishEvent: envelope => settler.add(envelope),
    connectionCount: () => sockets.size,
    deferredUpgrades: () => later.count(),
    tenantIds: () => [...new Set([...sockets].map(ws => ws.getUserData().tenantId))],
    closeAll() {
      later.close()
      // Events still held are not sent early: a client that got them before their settle time would
      // resume on another node past ids that node still holds, and get them twice. It resumes from
      // its last id and the next node sends them (test/cluster/sdk-stream-failover.test.ts).
      for (const ws of [...sockets]) ws.end(1001, 'server shutting down')
    },
  }
}
