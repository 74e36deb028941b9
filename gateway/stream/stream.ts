// GET /v1/stream (DECISIONS 6): a WebSocket of the caller's tenant's event envelopes, every type
// (session.target_swapped included), optionally filtered with `?types=a,b`. Authenticated in
// `upgrade` before the socket exists; each socket subscribes to its tenant's topic (or to one
// topic per requested type) and events fan out with `app.publish`: one serialization per event,
// the loop over sockets stays in C++. Slow consumers are closed at the backpressure limit so
// they never hold memory or slow the others.
import type { HttpRequest, HttpResponse, TemplatedApp, us_socket_context_t, WebSocket } from 'uWebSockets.js'
import type { Logger } from 'pino'
import type { EventEnvelope, EventType } from '../../sql/vocabulary/event-envelope.js'
import { EVENT_TYPES } from '../../sql/vocabulary/event-envelope.js'
import { renderProblem, type FieldIssue, type ProblemSlug } from '../../api/problems.js'
import { statusLine } from '../http/respond.js'
import { extractToken, type StreamPrincipal } from './auth.js'
import { deferredUpgrades } from './deferred-upgrades.js'

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
  /** Bytes buffered per socket before it is closed (DECISIONS 6: 1 MiB). */
  maxBackpressure?: number
  /** The `{base_url}` of problem `type` URIs on a refused handshake, read when one is refused. */
  publicBaseUrl?: () => string
  /** Clock for token expiry (epoch ms). */
  now?: () => number
  /** Told of every client closed, with its close code (metrics). */
  onClose?: (code: number) => void
}

export interface Stream {
  /** Fans one committed event out to its tenant's sockets on this node. */
  publishEvent(envelope: EventEnvelope): void
  connectionCount(): number
  /** Handshakes upgraded after an await, through the drain request (gateway/stream/deferred-upgrades.ts). */
  deferredUpgrades(): number
  /** Tenants with a client on this node (issue 17: what a replay of missed events reads). */
  tenantIds(): string[]
  /** Closes every socket (1001 going away), e.g. before the listen socket closes. */
  closeAll(): void
}

/** Publishes on `tenant/<id>` and `tenant/<id>/<type>`; a socket is on one or the other, never both. */
export function publishEvent(app: TemplatedApp, envelope: EventEnvelope): void {
  const all = tenantTopic(envelope.data.tenantId)
  const typed = typeTopic(envelope.data.tenantId, envelope.type)
  const toAll = app.numSubscribers(all) > 0
  const toTyped = app.numSubscribers(typed) > 0
  if (!toAll && !toTyped) return
  const json = JSON.stringify(envelope)
  if (toAll) app.publish(all, json)
  if (toTyped) app.publish(typed, json)
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
      // STYLE 6: everything out of req before the first await; req is stack-allocated.
      const authorization = req.getHeader('authorization')
      const secKey = req.getHeader('sec-websocket-key')
      const secProtocol = req.getHeader('sec-websocket-protocol')
      const secExtensions = req.getHeader('sec-websocket-extensions')
      const rawQuery = req.getQuery() ?? ''
      let aborted = false
      res.onAborted(() => { aborted = true })

      const types = parseTypes(rawQuery)
      if (!types.ok) { refuse(res, 'validation', 'types must name stream event types', [types.issue]); return }
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
          res.upgrade<SocketData>({ tenantId, topics, expMs: principal.expMs }, secKey, protocol, secExtensions, context)
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
      for (const topic of data.topics) ws.subscribe(topic)
      sockets.add(ws)
      // A token is good for 900 s; the stream does not outlive it (the client reconnects with a fresh one).
      if (data.expMs !== undefined) {
        const ms = Math.max(0, data.expMs - now())
        data.expiryTimer = setTimeout(() => ws.end(1008, 'token expired'), Math.min(ms, 2 ** 31 - 1))
        data.expiryTimer.unref()
      }
      log.debug({ tenantId: data.tenantId }, 'stream open')
    },

    message() {
      // Nothing is expected from clients; ignoring keeps a chatty client harmless.
    },

    close(ws: WebSocket<SocketData>, code: number, message: ArrayBuffer) {
      const data = ws.getUserData()
      if (data.expiryTimer) clearTimeout(data.expiryTimer)
      sockets.delete(ws)
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
    publishEvent: envelope => publishEvent(app, envelope),
    connectionCount: () => sockets.size,
    deferredUpgrades: () => later.count(),
    tenantIds: () => [...new Set([...sockets].map(ws => ws.getUserData().tenantId))],
    closeAll() {
      later.close()
      for (const ws of [...sockets]) ws.end(1001, 'server shutting down')
    },
  }
}
