// The composition root: builds every part of the service around the pure engine into one fully
// typed graph (no optional member: a missing part is a compile error). Building opens what the
// parts are made of (the database and its identity, the journal, the Redis connections) and
// loads nothing: gateway/service.ts start() does the boot's loading, then serves. Every part
// defers its own stop onto the shutdown stack as it is built. Committed changes travel through one
// event hub (sql/hub.ts): the emitters are handed the hub, and the consumers subscribe here, in
// `subscribe` below.
import { hostname } from 'node:os'
import { join } from 'node:path'
import uWS, { type TemplatedApp } from 'uWebSockets.js'
import type { Logger } from 'pino'
import { Engine, Mailboxes } from '../engine/index.js'
import type { ServiceConfig, Services, SessionCommands } from '../api/services.js'
import { uuidv7 } from '../sql/vocabulary/ids.js'
import type { EventEnvelope } from '../sql/vocabulary/event-envelope.js'
import { createHub, type Hub } from '../sql/hub.js'
import { createLogger } from '../api/log.js'
import { createAuthenticator } from '../api/auth/authenticate.js'
import { createRedisRateLimiter } from '../api/rate-limit/redis.js'
import { composeRateLimiter } from '../api/rate-limit/limiter.js'
import { setSignupMaxWait } from '../api/auth/hash-queue.js'
import { openDatabase, type Database } from '../sql/db.js'
import { migrate } from '../sql/migrate.js'
import { createPartyHasher, createPhoneCipher, type PhoneCipher } from '../sql/crypto.js'
import { createRecordWriter, type RecordWriter } from '../sql/records.js'
import { instanceId } from '../sql/instance.js'
import { StoreError } from '../sql/errors.js'
import { openJournal, readLeftovers, type Leftovers } from '../sql/journal.js'
import { createSecretCipher } from '../sql/webhooks.js'
import { recordPoolRefusal } from '../sql/pool-alerts.js'
import { orAfter } from '../api/app/deadline.js'
import { createCallCounter, type CallCounter } from '../api/app/call-counter.js'
import { createSessionRunner } from '../api/app/session-runner.js'
import { createReconciler } from '../api/app/reconcile.js'
import { TenantDirectory } from '../api/app/tenant-directory.js'
import { createOptOuts, type OptOuts } from '../api/cpaas/sms/opt-out.js'
import { createSmsCompliance } from '../api/cpaas/sms/compliance.js'
import { createPoolAlerter, type PoolAlerter } from '../api/app/pool-alerts.js'
import { ApiProblem } from '../api/route.js'
import type { Config } from './config.js'
import { listenerUrl } from './config.js'
import { busStreamName, createBus, PEER_LOST_MS, type Bus, type BusMessage } from './bus.js'
import { connectRequestRedis } from './redis.js'
import { createHttpApp, type HttpApp } from './http/index.js'
import { createReplayer } from './replay.js'
import { createEventOrder } from './event-order.js'
import { createDispatcher, type Dispatcher } from './webhooks/dispatcher.js'
import { facadeCallbackTargets } from './webhooks/twilio-callbacks.js'
import { registerStream, type Stream } from './stream/stream.js'
import { streamTokenVerifier } from './stream/auth.js'
import { outboxReplaySource } from './stream/replay-source.js'
import { registerConsole } from './console.js'
import { createServiceMetrics, listenMetrics, type ServiceMetrics } from './metrics.js'
import { serviceRoutes } from './routes.js'
import type { Readiness } from '../api/routes/health.js'
import { buildFacade, type Facade } from './facade.js'
import { startCpaas } from './cpaas.js'
import { once, type ShutdownStack } from './shutdown.js'
import type { StartOptions } from './service.js'

const RECORDS_WAIT_MS = 2_000
const ANNOUNCE_WAIT_MS = 250
/** How long another node's events wait for this node's reload of their session (gateway/event-order.ts). */
const RELOAD_WAIT_MS = 1_000

/** The port the listener is bound to, once it is (PORT=0 picks one); the listener's own state. */
export interface Listener { port: number | null }
/** booting → ready → draining (GET /v1/health/ready, maskline_ready). */
export interface ServiceState { readiness: Readiness }

export interface ServiceGraph {
  cfg: Config
  log: Logger
  now: () => number
  t0: number
  state: ServiceState
  metrics: ServiceMetrics
  metricsPort: number | null
  db: Database
  /** What an earlier run's journal holds that Postgres may lack: start() applies it first. */
  leftovers: Leftovers
  engine: Engine
  cipher: PhoneCipher
  records: RecordWriter
  tenants: TenantDirectory
  optOuts: OptOuts
  bus: Bus
  services: Services
  runner: ReturnType<typeof createSessionRunner>
  poolAlerts: PoolAlerter
  dispatcher: Dispatcher
  facade: Facade
  stream: Stream
  http: HttpApp
  listener: Listener
  /** Other nodes' changes (null on a single node): swept at start for what the boot load missed. */
  reconciler: ReturnType<typeof createReconciler> | null
}

export async function buildService(opts: StartOptions, shutdown: ShutdownStack): Promise<ServiceGraph> {
  const t0 = performance.now()
  const cfg = opts.config
  const now = opts.now ?? Date.now
  const log = createLogger({ level: cfg.logLevel, ...(opts.logDestination ? { destination: opts.logDestination } : {}) })
  setSignupMaxWait(cfg.signupMaxWaitMs)
  const nodeId = `${hostname()}-${process.pid}-${uuidv7().slice(-6)}`
  const onError = (component: string) => (code: string) => log.warn({ component, code }, 'recoverable error')
  const state: ServiceState = { readiness: 'booting' }
  const metrics = createServiceMetrics()
  metrics.sources.ready = () => state.readiness === 'ready'
  const hub = createHub()

  const db = opts.db ?? await openDatabase({ databaseUrl: cfg.databaseUrl, dataDir: cfg.dataDir, onError: onError('db') })
  if (!opts.db) shutdown.defer(() => db.close())
  // The metrics listener opens first: a slow boot shows on it (maskline_ready 0). It is not
  // worth refusing traffic for: a port in use is logged and the service runs without it.
  const metricsListener = cfg.metricsPort === null ? null : await listenMetrics(metrics.registry, cfg.host, cfg.metricsPort).catch(err => {
    log.warn({ code: 'metrics-listen', port: cfg.metricsPort, error: err }, 'metrics listener not started')
    return null
  })
  if (metricsListener) shutdown.defer(() => metricsListener.close())
  const metricsPort = metricsListener?.port ?? null
  await migrate(db.pool)

  // The write-behind journal (contract D5): what an earlier run answered for and Postgres never
  // got is read before this run's journal opens; start() applies it before anything is loaded.
  const journalDir = join(cfg.dataDir, 'journal')
  const dbId = await instanceId(db.pool)
  const leftovers = await readLeftovers(journalDir, dbId)
  const journal = await openJournal({ dir: journalDir, dbId, onError: onError('journal') })
  const records = createRecordWriter(db.pool, { flushMs: cfg.recordFlushMs, journal, onError: onError('records'), hub })
  const closeRecords = once(() => records.close(cfg.shutdownGraceSeconds * 1000))
  shutdown.defer(closeRecords)

  // Empty until start() loads them from Postgres.
  const engine = new Engine({ cooldownMs: cfg.cooldownSeconds * 1000 })
  const cipher = createPhoneCipher(cfg.phoneKey)
  const hashParty = createPartyHasher(cfg.phoneKey)
  const tenants = new TenantDirectory(db.pool, { upsert: t => engine.upsertTenant(t), hub })
  const optOuts = createOptOuts(db.pool, hub) // contract D11

  // Reads nothing until start(): other nodes' messages are for an engine that holds what Postgres had.
  const bus = await createBus({ redisUrl: cfg.redisUrl, nodeId, stream: cfg.busStream ?? busStreamName(dbId), onError: onError('bus'), maxLen: cfg.busMaxLen })
  // The record writer's last events go out on the bus: it is drained before the bus closes.
  shutdown.defer(async () => { await closeRecords(); await bus.close() })
  // The request path's connection (rate limits, health), with REDIS_URL (gateway/redis.ts).
  const redis = cfg.redisUrl ? await connectRequestRedis(cfg.redisUrl, log, shutdown) : null

  const dispatcher = createDispatcher({
    pool: db.pool, log, now, onOutcome: metrics.webhook, allowInsecure: cfg.webhookAllowInsecure, secrets: createSecretCipher(cfg.phoneKey),
    extraTargets: facadeCallbackTargets(db.pool, cfg.phoneKey),
  })
  // The base URL of problem types, OpenAPI `servers` and callback URLs: PUBLIC_BASE_URL, or this
  // listener's own URL, whose port is known once it is bound (PORT=0): set by start().
  // Everything reads config.publicBaseUrl when it needs it, never a copy.
  const config: ServiceConfig = {
    publicBaseUrl: cfg.publicBaseUrl ?? listenerUrl(cfg.host, cfg.port), nodeId, cooldownSeconds: cfg.cooldownSeconds,
    retentionDays: cfg.retentionDays, webhookAllowInsecure: cfg.webhookAllowInsecure, trustedProxies: cfg.trustedProxies,
  }
  const publicBaseUrl = () => config.publicBaseUrl
  const authenticator = createAuthenticator({ jwtSecret: cfg.jwtSecret, phoneKey: cfg.phoneKey, now, directory: tenants })

  // One uWS app: the WebSocket stream and the console first, then the HTTP routes and their fallbacks.
  const app: TemplatedApp = uWS.App()
  const listener: Listener = { port: null }
  const stream = registerStream(app, {
    verifyTenantToken: streamTokenVerifier(authenticator),
    log, publicBaseUrl, now, onClose: metrics.streamClosed,
    selfUrl: () => (listener.port === null ? null : listenerUrl(cfg.host, listener.port)),
    settleMs: cfg.streamSettleMs, replayWindowMs: cfg.streamReplayHours * 3_600_000, replay: outboxReplaySource(db.pool),
    ...(bus.kind === 'redis' ? { peersHeard: since => bus.peersHeard(since, PEER_LOST_MS + 3_000) } : {}),
  })
  registerConsole(app, { log, publicBaseUrl }) // GET /console

  // Other nodes (docs/scaling.md): reload what they committed from Postgres (the bus never carries
  // numbers), one reload per session at a time, newer versions only; reconcile with Postgres on
  // a sweep, and at once when the bus may have lost messages. A single node has nothing to do.
  const reconciler = bus.kind === 'redis'
    ? createReconciler({ db: db.pool, engine, tenants, cipher, log, sweepMs: cfg.reconcileMs, alsoSweep: [() => optOuts.sweep()] })
    : null
  if (reconciler) shutdown.defer(() => reconciler.close())
  const callCounter = createCallCounter(engine)
  // Every consumer of committed changes listens before the first part that commits is built.
  subscribe({ hub, bus, log, db, stream, dispatcher, callCounter, metrics, tenants, optOuts, reconciler, shutdown })

  const runner = createSessionRunner({
    // A session's events keep their order behind the call records queued before them (contract D6); while
    // Postgres is away that wait is bounded, and the command answers 503 (contract D13).
    flushRecords: async () => {
      if (await orAfter(records.flush(), RECORDS_WAIT_MS, 'late') === 'late') throw new StoreError('unavailable', 'records-backlog')
    },
    db: db.pool, engine, mailboxes: new Mailboxes(), tenants, cipher, hashParty, now, otherNodes: bus.kind === 'redis', hub,
  })
  // contract D12: a create refused for lack of numbers is counted (metric, and per tenant and hour
  // for the session analytics: a direct write off the answer's path; refusals are rare).
  const sessions: SessionCommands = {
    ...runner,
    create: (tenantId, body, idempotency) => runner.create(tenantId, body, idempotency).catch((err: unknown) => {
      if (err instanceof ApiProblem && err.slug === 'pool-exhausted') {
        metrics.poolExhausted()
        void recordPoolRefusal(db.pool, tenantId, now()).catch(() => log.warn({ code: 'pool-refusal' }, 'recoverable error'))
      }
      throw err
    }),
  }
  // contract D12: pool alerts, announced once cluster-wide (api/app/pool-alerts.ts says how).
  const poolAlerts = createPoolAlerter({ db: db.pool, engine, log, now, hub })
  shutdown.defer(() => poolAlerts.close())
  const cpaas = await startCpaas(cfg, { log, now, publicBaseUrl, numberProvider: n => engine.numberProvider(n) })

  const services: Services = {
    config,
    log,
    db: db.pool,
    jwtSecret: cfg.jwtSecret,
    phoneKey: cfg.phoneKey,
    hashParty,
    now,
    authenticator,
    sessions,
    rateLimiter: composeRateLimiter({
      // One deployment's counters (docs/scaling.md): keyed by the database, as the bus stream is.
      shared: redis ? createRedisRateLimiter({ redis, now, prefix: opts.rateLimitPrefix ?? `maskline:rl:${dbId}:` }) : undefined, now, log,
    }),
    poolCounts: () => engine.poolCounts(now()),
    cpaasHealth: () => cpaas.provider.health(),
    onTenantChanged: t => tenants.changedHere(t),
    webhookDispatcher: dispatcher,
  }

  // The Twilio Proxy v1 façade (docs/twilio-proxy.md) and its callbacks around the native ones.
  const facade = buildFacade({ cfg, log, now, services, runner, provider: cpaas.provider, shutdown })
  const callbackRoutes = cpaas.routes({
    intercept: facade.intercept, outOfSession: facade.outOfSession,
    engine, tenants, hashParty, records, callCounter, log, now, publicBaseUrl, countCallback: metrics.callback,
    smsCompliance: createSmsCompliance({ optOuts, tenants, hashParty, records, provider: cpaas.provider, log, now }),
  })
  const http = createHttpApp({
    app, services,
    routes: serviceRoutes({ db, redis, callbackRoutes, facade, readiness: () => state.readiness }),
    checkResponses: opts.checkResponses ?? false,
    verifyCallback: req => cpaas.verifyCallback(req),
    metrics: metrics.requests,
    accessLog: cfg.accessLog,
  })

  return {
    cfg, log, now, t0, state, metrics, metricsPort, db, leftovers, engine, cipher, records, tenants, optOuts, bus, services, runner, poolAlerts,
    dispatcher, facade, stream, http, listener, reconciler,
  }
}

/**
 * Who hears of committed changes: this node's WebSocket clients (through the event order and,
 * with other nodes, the replayer), the other nodes (the bus), the webhook dispatcher, the call
 * counter; and what the other nodes committed, from the bus.
 */
function subscribe(d: {
  hub: Hub; bus: Bus; log: Logger; db: Database; stream: Stream; dispatcher: Dispatcher; callCounter: CallCounter; metrics: ServiceMetrics
  tenants: TenantDirectory; optOuts: OptOuts; reconciler: ReturnType<typeof createReconciler> | null; shutdown: ShutdownStack
}): void {
  const { hub, bus, stream, dispatcher, callCounter, reconciler } = d
  // docs/scaling.md: what the bus lost is replayed from the outbox to this node's WebSocket clients
  // (gateway/replay.ts); every event for them goes through it, so none is sent twice and live
  // ones wait behind a replay. A single node has no bus to lose anything: straight to the stream.
  const replayer = reconciler
    ? createReplayer({ db: d.db.pool, log: d.log, publish: e => stream.publishEvent(e), tenants: () => stream.tenantIds() })
    : null
  if (replayer) d.shutdown.defer(() => replayer.close())
  // Another node's events wait for this node's reload of their session (gateway/event-order.ts).
  const ordered = createEventOrder({
    deliver: replayer ? e => replayer.deliver(e) : e => stream.publishEvent(e),
    reloadUnderWay: id => reconciler?.pending(id) ?? null, waitMs: RELOAD_WAIT_MS,
    onError: err => d.log.error({ code: 'event-delivery', error: err }, 'event not delivered to WebSocket clients'),
  })

  // In this order, for every commit: the call counter (records only), this node's WebSocket
  // clients, the other nodes (a session's new version first), the webhook dispatcher, the metrics.
  const committed = (envelopes: EventEnvelope[], first: BusMessage[] = []) => {
    for (const e of envelopes) ordered.local(e)
    bus.publish([...first, ...envelopes.map(envelope => ({ kind: 'event' as const, envelope }))])
    if (envelopes.length) dispatcher.wake()
    d.metrics.committed(envelopes)
  }
  hub.on('records', envelopes => callCounter.committed(envelopes))
  hub.on('records', envelopes => committed(envelopes))
  hub.on('events', envelopes => committed(envelopes))
  hub.on('session', (id, version, envelopes) => committed(envelopes, [{ kind: 'session', id, version }]))
  // A tenant change is answered for once the other nodes can read it (bounded: Redis never holds a request up).
  hub.on('tenant', (id, waitUntil) => {
    bus.publish([{ kind: 'tenant', id }])
    waitUntil(orAfter(bus.settled(), ANNOUNCE_WAIT_MS, undefined))
  })
  hub.on('optOut', change => bus.publish([{ kind: 'opt-out', ...change }]))

  if (!reconciler) return
  bus.onMessage(msg => {
    if (msg.kind === 'event') {
      callCounter.remote(msg.envelope)
      ordered.remote(msg.envelope)
    }
    else if (msg.kind === 'tenant') d.tenants.changed({ id: msg.id }) // its state and its API keys
    else if (msg.kind === 'opt-out') d.optOuts.apply(msg)
    else reconciler.reload(msg.id, msg.version)
  })
  bus.onGap((reason, heardUntil) => {
    replayer?.gap(reason, heardUntil) // first: it holds the live events read after the gap
    reconciler.gap(reason)
  })
}
