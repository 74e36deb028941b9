// The composition root: builds every adapter around the pure engine, rebuilds the engine from
// Postgres, and serves everything from one uWS app. Tests and the bench start the service
// through this same function.
import { unlink } from 'node:fs/promises'
import { hostname } from 'node:os'
import { join } from 'node:path'
import type { Redis } from 'ioredis'
import { sql } from 'slonik'
import type { Logger } from 'pino'
import { Engine, Mailboxes, type TenantRouting } from '../engine/index.js'
import type { E164 } from '../engine/types.js'
import type { Services } from '../api/services.js'
import type { EventEnvelope } from '../sql/vocabulary/event-envelope.js'
import { uuidv7 } from '../sql/vocabulary/ids.js'
import { createLogger } from '../api/log.js'
import { createAuthenticator } from '../api/auth/authenticate.js'
import { createRedisRateLimiter } from '../api/rate-limit/redis.js'
import { composeRateLimiter } from '../api/rate-limit/limiter.js'
import { setSignupMaxWait } from '../api/auth/hash-queue.js'
import { analyticsRoutes } from '../api/routes/analytics.js'
import { authRoutes } from '../api/routes/auth.js'
import { billingRoutes } from '../api/routes/billing.js'
import { configRoutes } from '../api/routes/config.js'
import { deviceRoutes } from '../api/routes/devices.js'
import { healthRoutes, readinessRoute, type HealthChecks, type Readiness } from '../api/routes/health.js'
import { numberRoutes } from '../api/routes/numbers.js'
import { openapiRoute } from '../api/routes/openapi.js'
import { callRoutes, sessionRoutes } from '../api/routes/sessions.js'
import { webhookRoutes } from '../api/routes/webhooks.js'
import { consoleRoutes } from '../api/routes/console.js'
import { twilioProxyRoutes } from '../api/twilio-proxy/router.js'
import { twilioCredentialRoutes } from '../api/twilio-proxy/credentials-route.js'
import { createProxyAuthenticator } from '../api/twilio-proxy/auth.js'
import { enginePinnedSessions } from '../api/twilio-proxy/native.js'
import { expireDue as expireFacadeSessions } from '../api/twilio-proxy/lifecycle.js'
import { openDatabase, type Database } from '../sql/db.js'
import { migrate } from '../sql/migrate.js'
import { createPartyHasher, createPhoneCipher } from '../sql/crypto.js'
import { createBatchStats, loadLiveSessions, loadNumbers, seedNumbers } from '../sql/sessions.js'
import { countLiveSessions } from '../sql/session-load.js'
import { createRecordWriter } from '../sql/records.js'
import { instanceId } from '../sql/instance.js'
import { StoreError } from '../sql/errors.js'
import { openJournal, readLeftovers } from '../sql/journal.js'
import { purgeOldRecords } from '../sql/retention.js'
import { recordNumberRentals } from '../sql/billing.js'
import { createSecretCipher } from '../sql/webhooks.js'
import { startCpaas } from './cpaas.js'
import { listenerUrl, type Config } from './config.js'
import { orAfter } from '../api/app/deadline.js'
import { busStreamName, createBus, PEER_LOST_MS, type Bus, type BusMessage } from './bus.js'
import { collectGarbage } from './heap.js'
import { createHttpApp } from './http/index.js'
import { createCallCounter } from '../api/app/call-counter.js'
import { createSessionRunner } from '../api/app/session-runner.js'
import { createReconciler } from '../api/app/reconcile.js'
import { createReplayer } from './replay.js'
import { createEventOrder } from './event-order.js'
import { sessionChangeWatermark } from '../sql/session-changes.js'
import { TenantDirectory } from '../api/app/tenant-directory.js'
import { loadOptOutSet } from '../api/cpaas/sms/opt-out.js'
import { createSmsCompliance } from '../api/cpaas/sms/compliance.js'
import { startPoolAlerter, type PoolAlerter } from '../api/app/pool-alerts.js'
import { recordPoolRefusal } from '../sql/pool-alerts.js'
import { ApiProblem } from '../api/route.js'
import { createDispatcher } from './webhooks/dispatcher.js'
import { facadeCallbackTargets, facadeIntercept, facadeOutOfSession, type OutOfSession } from './webhooks/twilio-callbacks.js'
import { registerStream, type Stream } from './stream/stream.js'
import { streamTokenVerifier } from './stream/auth.js'
import { outboxReplaySource } from './stream/replay-source.js'
import { registerConsole } from './console.js'
import { createServiceMetrics, listenMetrics, type ServiceMetrics } from './metrics.js'

export interface StartOptions {
  config: Config
  /** Where log lines go (tests capture them); stdout otherwise. */
  logDestination?: NodeJS.WritableStream
  now?: () => number
  /** Response bodies are checked against their schemas (tests). */
  checkResponses?: boolean
  /** An already-open, migrated database (tests); it stays open when the service closes. */
  db?: Database
  /** Redis key prefix of the rate limits (tests: services sharing one Redis must not share limits). */
  rateLimitPrefix?: string
}

export interface RunningService {
  port: number
  url: string
  log: Logger
  engine: Engine
  services: Services
  /** The tenant directory (tests suspend a tenant through it, as an operator would). */
  tenants: TenantDirectory
  db: Database
  /** Boot figures, also logged. */
  boot: { ms: number; liveSessions: number }
  /** Runs the expiry sweep now (tests drive it instead of waiting for the timer). */
  expireDue(): Promise<number>
  /** Resolves once every call and SMS record operation queued so far is in Postgres. */
  flushRecords(): Promise<void>
  /** The Prometheus registry and its listener's port (null: METRICS_PORT=off or not bound). */
  metrics: ServiceMetrics
  metricsPort: number | null
  /** contract D12: pool alerts; `check()` runs the once-a-second check now (tests). */
  poolAlerts: PoolAlerter
  /** booting → ready → draining (GET /v1/health/ready). */
  readiness(): Readiness
  /** The graceful stop (SIGTERM): readiness 503 and the listener closed at once, in-flight requests
   * finish (SHUTDOWN_GRACE_SECONDS), then the webhook attempts, the record writer and the bus. */
  close(): Promise<void>
}

const RECORDS_WAIT_MS = 2_000
const EXPIRY_SWEEP_MS = 250 // contract D4: expiry fires within 1 s of expiresAt
const FACADE_SWEEP_MS = 1_000
const DAY_MS = 86_400_000
const TENANT_RESYNC_MS = 30_000
const ANNOUNCE_WAIT_MS = 250
/** How long another node's events wait for this node's reload of their session (gateway/event-order.ts). */
const RELOAD_WAIT_MS = 1_000
const sqlPing = sql.unsafe`SELECT 1`
const outboxBacklog = sql.unsafe`SELECT count(*) FROM outbox WHERE done_at IS NULL`

export async function startService(opts: StartOptions): Promise<RunningService> {
  const t0 = performance.now()
  const cfg = opts.config
  const now = opts.now ?? Date.now
  const log = createLogger({ level: cfg.logLevel, ...(opts.logDestination ? { destination: opts.logDestination } : {}) })
  setSignupMaxWait(cfg.signupMaxWaitMs)
  const nodeId = `${hostname()}-${process.pid}-${uuidv7().slice(-6)}`
  const onError = (component: string) => (code: string) => log.warn({ component, code }, 'recoverable error')
  let readiness: Readiness = 'booting'
  const metrics = createServiceMetrics()
  metrics.sources.ready = () => readiness === 'ready'

  const db = opts.db ?? await openDatabase({ databaseUrl: cfg.databaseUrl, dataDir: cfg.dataDir, onError: onError('db') })
  const closers: Array<() => Promise<unknown> | unknown> = opts.db ? [] : [() => db.close()]
  let metricsPort: number | null = null
  try {
    // The metrics listener opens first: a slow boot shows on it (maskline_ready 0). It is not
    // worth refusing traffic for: a port in use is logged and the service runs without it.
    if (cfg.metricsPort !== null) {
      const m = await listenMetrics(metrics.registry, cfg.host, cfg.metricsPort).catch(err => {
        log.warn({ code: 'metrics-listen', port: cfg.metricsPort, error: err }, 'metrics listener not started')
        return null
      })
      if (m) { metricsPort = m.port; closers.push(() => m.close()) }
    }
    await migrate(db.pool)
    await seedNumbers(db.pool, cfg.numberPool, cfg.provider)

    // The write-behind journal (contract D5): what an earlier run answered for and Postgres never
    // got is applied before anything is loaded from Postgres or served.
    const journalDir = join(cfg.dataDir, 'journal')
    const dbId = await instanceId(db.pool)
    const leftovers = await readLeftovers(journalDir, dbId)
    const journal = await openJournal({ dir: journalDir, dbId, onError: onError('journal') })
    let fanOutLate: (envs: EventEnvelope[]) => void = () => {}
    let countLate: (envs: EventEnvelope[]) => void = () => {}
    const records = createRecordWriter(db.pool, {
      flushMs: cfg.recordFlushMs, journal, onError: onError('records'), announce: envs => { countLate(envs); fanOutLate(envs) },
    })
    closers.unshift(() => records.close(cfg.shutdownGraceSeconds * 1000))
    if (leftovers.batches.length > 0) {
      await records.replay(leftovers.batches)
      for (const f of leftovers.files) await unlink(f).catch(() => {})
      log.info({ batches: leftovers.batches.length }, 'journal replayed')
    }

    // docs/scaling.md: the reconciliation sweep starts from what the boot load below will see.
    const changesFrom = await sessionChangeWatermark(db.pool)
    const rebuildAt = performance.now() // the boot's phases are logged ('boot'): where a slow boot goes
    const engine = new Engine({ cooldownMs: cfg.cooldownSeconds * 1000 })
    const mailboxes = new Mailboxes()
    const cipher = createPhoneCipher(cfg.phoneKey)
    const hashParty = createPartyHasher(cfg.phoneKey)
    let announceTenant: (id: string) => Promise<void> = async () => {}
    const tenants = new TenantDirectory(db.pool, { upsert: t => engine.upsertTenant(t), announce: id => announceTenant(id) })
    await tenants.loadAll()
    const numbers = await loadNumbers(db.pool)
    engine.addNumbers(numbers.map(n => ({ number: n.number as E164, region: n.region, provider: n.provider, releasedAt: n.releasedAt, lastTenantId: n.lastTenantId, boundTenantId: n.boundTenantId })))
    const sessionsAt = performance.now()
    // One binary COPY, decoded and decrypted a batch at a time (sql/session-load.ts). Nothing
    // listens before the engine holds every live session: no request is answered, readiness
    // included, while routes are missing.
    engine.reserve(await countLiveSessions(db.pool))
    const liveSessions = await loadLiveSessions(db.pool, cipher, (recs, extras) => { for (let i = 0; i < recs.length; i++) engine.load(recs[i]!, extras[i]) })
    const loadedAt = performance.now()
    const gcMs = collectGarbage() // the load's garbage, now rather than seconds into serving (gateway/heap.ts)
    log.info({
      liveSessions,
      ms: { database: Math.round(rebuildAt - t0), tenantsAndNumbers: Math.round(sessionsAt - rebuildAt), sessions: Math.round(loadedAt - sessionsAt), gc: Math.round(gcMs) },
      heapMiB: Math.round(process.memoryUsage().heapUsed / 2 ** 20),
    }, 'boot')

    const bus: Bus = await createBus({ redisUrl: cfg.redisUrl, nodeId, stream: cfg.busStream ?? busStreamName(dbId), onError: onError('bus'), maxLen: cfg.busMaxLen })
    closers.push(() => bus.close())
    // contract D11: every opted-out party (by hash) in memory before anything is served.
    const optOuts = await loadOptOutSet(db.pool, msgs => bus.publish(msgs))
    // The change is answered for once the other nodes can read it (bounded: Redis never holds a request up).
    announceTenant = id => { bus.publish([{ kind: 'tenant', id }]); return orAfter(bus.settled(), ANNOUNCE_WAIT_MS, undefined) }
    // What the bus lost (a Redis outage) or SQL edited by hand reaches the directory within this.
    const resync = setInterval(() => { void tenants.resync().catch(() => log.warn({ code: 'tenant-resync' }, 'recoverable error')) }, TENANT_RESYNC_MS)
    resync.unref()
    closers.unshift(() => clearInterval(resync))
    let redis: Redis | null = null
    if (cfg.redisUrl) {
      // The request path's connection (rate limits, health): no offline queue, so a Redis outage
      // costs a request milliseconds, never a wait for the reconnect (a request waits at most
      // LIMITER_TIMEOUT_MS, see api/rate-limit/limiter.ts; commandTimeout only bounds what a dead
      // connection holds); reconnects at most 1 s apart.
      const { Redis: RedisClient } = await import('ioredis') // only with a REDIS_URL (gateway/bus.ts)
      const r = redis = new RedisClient(cfg.redisUrl, { enableOfflineQueue: false, commandTimeout: 500, maxRetriesPerRequest: 0, retryStrategy: n => Math.min(n * 100, 1_000) })
      r.on('error', () => log.warn({ component: 'redis', code: 'redis-error' }, 'recoverable error'))
      closers.push(() => (r.status === 'ready' ? r.quit().then(() => {}, () => r.disconnect()) : r.disconnect()))
      // Boot gives the first connection a moment (the first requests then get real decisions); it
      // never waits for Redis itself.
      if (r.status !== 'ready') {
        await new Promise<void>(resolve => {
          const done = () => { clearTimeout(timer); r.off('ready', done).off('error', done); resolve() }
          const timer = setTimeout(done, 1_000)
          r.once('ready', done).once('error', done)
        })
      }
    }

    // GET /v1/health must answer even when a dependency hangs: 'down' after 2 s.
    const checks: HealthChecks = async () => ({
      postgres: await orAfter(db.pool.oneFirst(sqlPing).then(() => 'ok', () => 'down'), 2_000, 'down'),
      redis: redis ? await orAfter(redis.ping().then(r => (r === 'PONG' ? 'ok' : 'down'), () => 'down'), 2_000, 'down') : 'disabled',
    })

    let stream: Stream | null = null
    /** The port the listener is bound to, once it is (PORT=0 picks one). */
    let boundPort: number | null = null
    const dispatcher = createDispatcher({
      pool: db.pool, log, now, onOutcome: metrics.webhook, allowInsecure: cfg.webhookAllowInsecure, secrets: createSecretCipher(cfg.phoneKey),
      extraTargets: facadeCallbackTargets(db.pool, cfg.phoneKey),
    })

    // docs/scaling.md: what the bus lost is replayed from the outbox to this node's WebSocket clients
    // (gateway/replay.ts); every event for them goes through it, so none is sent twice and live
    // ones wait behind a replay. A single node has no bus to lose anything: straight to the stream.
    const replayer = bus.kind === 'redis'
      ? createReplayer({
        db: db.pool, log, publish: e => stream?.publishEvent(e), tenants: () => stream?.tenantIds() ?? [],
      })
      : null
    if (replayer) closers.unshift(() => replayer.close())
    const toClients = (e: EventEnvelope) => (replayer ? replayer.deliver(e) : stream?.publishEvent(e))
    // Another node's events wait for this node's reload of their session (gateway/event-order.ts).
    let reloadUnderWay: (sessionId: string) => Promise<void> | null = () => null
    const ordered = createEventOrder({
      deliver: toClients, reloadUnderWay: id => reloadUnderWay(id), waitMs: RELOAD_WAIT_MS,
      onError: err => log.error({ code: 'event-delivery', error: err }, 'event not delivered to WebSocket clients'),
    })

    /** After a commit on this node: local WebSocket clients, the other nodes, the webhook dispatcher. */
    function fanOut(envelopes: EventEnvelope[], extra: BusMessage[] = []) {
      for (const e of envelopes) ordered.local(e)
      bus.publish([...extra, ...envelopes.map(envelope => ({ kind: 'event' as const, envelope }))])
      if (envelopes.length) dispatcher.wake()
    }

    // The base URL of problem types, OpenAPI `servers` and callback URLs: PUBLIC_BASE_URL, or this
    // listener's own URL, whose port is known once it is bound (PORT=0): set after listen below.
    // Everything reads services.config.publicBaseUrl when it needs it, never a copy.
    const services: Services = {
      webhookDispatcher: dispatcher,
      config: {
        publicBaseUrl: cfg.publicBaseUrl ?? listenerUrl(cfg.host, cfg.port), nodeId, cooldownSeconds: cfg.cooldownSeconds,
        retentionDays: cfg.retentionDays, webhookAllowInsecure: cfg.webhookAllowInsecure, trustedProxies: cfg.trustedProxies,
      },
      log,
      db: db.pool,
      jwtSecret: cfg.jwtSecret,
      phoneKey: cfg.phoneKey,
      hashParty,
      now,
      authenticator: createAuthenticator({ jwtSecret: cfg.jwtSecret, phoneKey: cfg.phoneKey, now, directory: tenants }),
      tenants,
      poolCounts: () => engine.poolCounts(now()),
      onTenantChanged: (t: TenantRouting) => tenants.changedHere(t),
      rateLimiter: composeRateLimiter({
        shared: redis ? createRedisRateLimiter({ redis, now, ...(opts.rateLimitPrefix ? { prefix: opts.rateLimitPrefix } : {}) }) : undefined, now, log,
      }),
    }

    fanOutLate = fanOut
    const callCounter = createCallCounter(engine)
    countLate = envs => callCounter.committed(envs)
    const runner = createSessionRunner({
      // A session's events keep their order behind the call records queued before them (contract D6); while
      // Postgres is away that wait is bounded, and the command answers 503 (contract D13).
      flushRecords: async () => {
        if (await orAfter(records.flush(), RECORDS_WAIT_MS, 'late') === 'late') throw new StoreError('unavailable', 'records-backlog')
      },
      db: db.pool, engine, mailboxes, tenants, cipher, hashParty, now, otherNodes: bus.kind === 'redis',
      announce: (id, version, envelopes) => fanOut(envelopes, [{ kind: 'session', id, version }]),
    })
    // contract D12: a create refused for lack of numbers is counted (metric, and per tenant and hour
    // for the session analytics: a direct write off the answer's path; refusals are rare).
    const countRefusal = (tenantId: string) => {
      metrics.poolExhausted()
      void recordPoolRefusal(db.pool, tenantId, now()).catch(() => log.warn({ code: 'pool-refusal' }, 'recoverable error'))
    }
    services.sessions = {
      ...runner,
      create: (tenantId, body, idempotency) => runner.create(tenantId, body, idempotency).catch((err: unknown) => {
        if (err instanceof ApiProblem && err.slug === 'pool-exhausted') countRefusal(tenantId)
        throw err
      }),
    }
    // contract D12: pool alerts, announced once cluster-wide (api/app/pool-alerts.ts says how).
    const poolAlerts = await startPoolAlerter({ db: db.pool, engine, log, now, announce: envs => fanOut(envs) })
    closers.unshift(() => poolAlerts.close())

    const cpaas = await startCpaas(cfg, { log, now, publicBaseUrl: () => services.config.publicBaseUrl, numberProvider: n => engine.numberProvider(n) })
    const provider = cpaas.provider
    services.cpaasHealth = () => provider.health()
    const intercept = facadeIntercept({ pool: db.pool, phoneKey: cfg.phoneKey, allowInsecure: cfg.webhookAllowInsecure, timeoutMs: cfg.interceptTimeoutMs, log })
    await intercept.reload()
    closers.unshift(() => intercept.close())
    // Made once the façade's deps are (below): it creates sessions as the façade does.
    let outOfSession: OutOfSession | null = null
    const callbackRoutes = cpaas.routes({
      intercept, outOfSession: { check: q => outOfSession?.check(q) },
      engine, tenants, hashParty, records, callCounter, log, now,
      publicBaseUrl: () => services.config.publicBaseUrl, countCallback: metrics.callback,
      smsCompliance: createSmsCompliance({ optOuts, tenants, hashParty, records, provider, log, now }),
    })

    // Other nodes (docs/scaling.md): reload what they committed from Postgres (the bus never carries
    // numbers), one reload per session at a time, newer versions only; reconcile with Postgres on
    // a sweep, and at once when the bus may have lost messages. A single node has nothing to do.
    if (bus.kind === 'redis') {
      const reconciler = createReconciler({
        db: db.pool, engine, tenants, cipher, log, since: changesFrom, sweepMs: cfg.reconcileMs, alsoSweep: [() => optOuts.sweep()],
      })
      closers.unshift(() => reconciler.close())
      reloadUnderWay = id => reconciler.pending(id)
      bus.onMessage(msg => {
        if (msg.kind === 'event') {
          callCounter.remote(msg.envelope)
          ordered.remote(msg.envelope)
        }
        else if (msg.kind === 'tenant') tenants.changed({ id: msg.id }) // its state and its API keys
        else if (msg.kind === 'opt-out') optOuts.apply(msg)
        else reconciler.reload(msg.id, msg.version)
      })
      bus.onGap((reason, heardUntil) => {
        replayer?.gap(reason, heardUntil) // first: it holds the live events read after the gap
        reconciler.gap(reason)
      })
      void reconciler.sweep() // what was committed between the boot load and the bus reader's start
    }

    // The Twilio Proxy v1 façade (docs/twilio-proxy.md): its credentials on the maskline API, its
    // REST API under /proxy (not in the OpenAPI document: Twilio's own describes it).
    const proxyAuth = createProxyAuthenticator(now)
    const facade = {
      auth: proxyAuth, native: enginePinnedSessions({ ...services.sessions, expireDue: () => runner.expireDue() }), configuredBaseUrl: () => cfg.publicBaseUrl,
      changed: async () => { await Promise.all([intercept.reload(), outOfSession?.reload()]) },
      sendSms: async (from: string, to: string, text: string) => (await provider.sendSms({ from, to, text })).providerMessageId,
    }
    outOfSession = facadeOutOfSession({ services, deps: facade, allowInsecure: cfg.webhookAllowInsecure, timeoutMs: cfg.interceptTimeoutMs, log })
    await outOfSession.reload()
    closers.unshift(() => outOfSession?.close())
    // Façade sessions expire by a sweep too (their native sessions carry no timers of their own).
    let facadeSweeping = false
    const facadeSweep = setInterval(() => {
      if (facadeSweeping) return
      facadeSweeping = true
      void expireFacadeSessions(db.pool, facade.native, now())
        .catch(() => log.warn({ code: 'twilio-proxy-sweep' }, 'recoverable error')).finally(() => { facadeSweeping = false })
    }, FACADE_SWEEP_MS)
    facadeSweep.unref()
    closers.unshift(() => clearInterval(facadeSweep))
    const routes = [
      ...authRoutes, ...sessionRoutes, ...callRoutes, ...configRoutes, ...deviceRoutes, ...numberRoutes,
      ...webhookRoutes, ...healthRoutes(checks), readinessRoute(() => readiness), ...callbackRoutes,
      ...analyticsRoutes, ...billingRoutes, ...twilioCredentialRoutes(proxyAuth),
    ]
    routes.push(...consoleRoutes(routes)) // the operator console's API: the same handlers for user tokens
    // In the table it documents (built on first request), so the document lists itself.
    routes.push(openapiRoute(routes, { stream: true }))
    const http = createHttpApp({
      services,
      routes: [...routes, ...twilioProxyRoutes(facade)],
      checkResponses: opts.checkResponses ?? false,
      verifyCallback: req => cpaas.verifyCallback(req),
      metrics: metrics.requests,
      accessLog: cfg.accessLog,
      ws: app => {
        stream = registerStream(app, {
          verifyTenantToken: streamTokenVerifier(services.authenticator),
          log, publicBaseUrl: () => services.config.publicBaseUrl, now, onClose: metrics.streamClosed,
          selfUrl: () => (boundPort === null ? null : listenerUrl(cfg.host, boundPort)),
          settleMs: cfg.streamSettleMs, replayWindowMs: cfg.streamReplayHours * 3_600_000, replay: outboxReplaySource(db.pool),
          ...(bus.kind === 'redis' ? { peersHeard: since => bus.peersHeard(since, PEER_LOST_MS + 3_000) } : {}),
        })
        registerConsole(app, { log, publicBaseUrl: () => services.config.publicBaseUrl }) // GET /console
      },
    })
    const port = boundPort = await http.listen(cfg.host, cfg.port)
    // Before any request is read: uWS serves them from later turns of the event loop.
    if (cfg.publicBaseUrl === null) services.config.publicBaseUrl = listenerUrl(cfg.host, port)
    // WebSocket clients get 1001 at once; requests in flight get SHUTDOWN_GRACE_SECONDS. Then one
    // turn of the event loop's check phase: a voice fetch answers first and queues its call record
    // in a setImmediate (api/cpaas/callbacks/voice.ts), so a stop that began in the turn of an answer
    // (nothing in flight) would otherwise close the record writer (a later closer) before that
    // record reached it (test/durability/drain-last-call.test.ts).
    let httpClosing: Promise<void> | null = null
    const closeHttp = () => (httpClosing ??= (stream?.closeAll(), http.close(cfg.shutdownGraceSeconds * 1000)
      .then(() => new Promise<void>(resolve => setImmediate(resolve)))))
    closers.unshift(closeHttp)
    Object.assign(metrics.sources, {
      liveSessions: () => engine.size(),
      poolCounts: () => engine.poolCounts(now()),
      recordWriter: () => records.stats(),
      recordFlush: async () => {
        const t = performance.now()
        return await orAfter(records.flush(), 1_000, 'late') === 'late' ? 1 : (performance.now() - t) / 1000
      },
      outboxBacklog: () => orAfter(db.pool.oneFirst(outboxBacklog).then(Number), 1_000, NaN),
      streamClients: () => stream?.connectionCount() ?? 0,
      breakers: () => provider.health(),
      poolAlertLevel: region => poolAlerts.level(region),
      createBatches: () => createBatchStats(db.pool),
    } satisfies typeof metrics.sources)

    // Sessions that expired while the process was down expire now, once (the database decides).
    let sweeping: Promise<number> = runner.expireDue()
    await sweeping
    const sweep = setInterval(() => {
      sweeping = sweeping.then(() => runner.expireDue()).catch(() => { log.warn({ code: 'expiry-sweep' }, 'recoverable error'); return 0 })
    }, EXPIRY_SWEEP_MS)
    sweep.unref()
    dispatcher.start()
    closers.unshift(() => dispatcher.stop(), () => { clearInterval(sweep); return sweeping })

    // Daily housekeeping: retention (contract 8.7) and number rental usage (contract D7).
    const daily = setInterval(() => {
      void purgeOldRecords(db.pool, cfg.retentionDays).catch(() => log.warn({ code: 'retention' }, 'recoverable error'))
      void recordNumberRentals(db.pool, now()).catch(() => log.warn({ code: 'number-rental' }, 'recoverable error'))
    }, DAY_MS)
    daily.unref()
    closers.unshift(() => clearInterval(daily))

    readiness = 'ready'
    const ms = Math.round(performance.now() - t0)
    log.info({ port, metricsPort, db: db.kind, bus: bus.kind, provider: cfg.provider, signature: cfg.signature, liveSessions, bootMs: ms }, 'listening')
    return {
      port,
      url: listenerUrl(cfg.host, port),
      log,
      engine,
      services,
      tenants,
      db,
      boot: { ms, liveSessions },
      expireDue: () => (sweeping = sweeping.then(() => runner.expireDue())),
      flushRecords: () => records.flush(),
      metrics,
      metricsPort,
      poolAlerts,
      readiness: () => readiness,
      async close() {
        if (readiness !== 'draining') {
          readiness = 'draining'
          // What the drain starts with: the requests answered while it runs, and the record
          // operations that must reach Postgres before the exit (the SIGTERM test reads this line).
          log.info({ inFlight: http.inFlight(), recordsPending: records.stats().pending }, 'draining')
        }
        const t = performance.now()
        void closeHttp() // the listener closes now, not after the closers before it
        for (const c of closers) {
          try { await c() } catch { /* keep closing the rest */ }
        }
        log.info({ ms: Math.round(performance.now() - t), recordsPending: records.stats().pending }, 'drained')
      },
    }
  } catch (err) {
    for (const c of closers.reverse()) await Promise.resolve().then(c).catch(() => {})
    throw err
  }
}

