// Starts the service: gateway/compose.ts builds the graph (opening what its parts are made of: the
// database and its identity, the journal, the Redis connections); start() below does the boot's
// loading (the journal's leftovers, Postgres into memory), then makes it serve: the bus reader,
// the listener, the sweeps and the timers, readiness. Tests and the bench start the service through
// this same function; gateway/main.ts is the process around it.
import { unlink } from 'node:fs/promises'
import type { Logger } from 'pino'
import { sql } from 'slonik'
import type { Engine } from '../engine/index.js'
import type { Services } from '../api/services.js'
import type { Readiness } from '../api/routes/health.js'
import type { PoolAlerter } from '../api/app/pool-alerts.js'
import type { TenantDirectory } from '../api/app/tenant-directory.js'
import { orAfter } from '../api/app/deadline.js'
import type { Database } from '../sql/db.js'
import { createBatchStats, loadLiveSessions, loadNumbers, seedNumbers } from '../sql/sessions.js'
import { countLiveSessions } from '../sql/session-load.js'
import { sessionChangeWatermark } from '../sql/session-changes.js'
import type { E164 } from '../engine/types.js'
import { collectGarbage } from './heap.js'
import { purgeOldRecords } from '../sql/retention.js'
import { recordNumberRentals } from '../sql/billing.js'
import { listenerUrl, type Config } from './config.js'
import type { ServiceMetrics } from './metrics.js'
import { buildService, type ServiceGraph } from './compose.js'
import { createShutdownStack, once, type ShutdownStack } from './shutdown.js'

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

const EXPIRY_SWEEP_MS = 250 // contract D4: expiry fires within 1 s of expiresAt
const FACADE_SWEEP_MS = 1_000
const DAY_MS = 86_400_000
const TENANT_RESYNC_MS = 30_000
const outboxBacklog = sql.unsafe`SELECT count(*) FROM outbox WHERE done_at IS NULL`

export async function startService(opts: StartOptions): Promise<RunningService> {
  const shutdown = createShutdownStack()
  try {
    return await start(await buildService(opts, shutdown), shutdown)
  } catch (err) {
    await shutdown.run()
    throw err
  }
}

/**
 * `task` every `ms`, skipped while a run is still going (a slow run, e.g. while Postgres is away,
 * never piles runs up); stopped by the stack, which waits for the run in flight. `run()` runs it
 * now, after the one in flight, and gives its own outcome (tests drive the sweeps through it).
 */
function every<T>(ms: number, shutdown: ShutdownStack, task: () => Promise<T>, onError: () => void): () => Promise<T> {
  let last: Promise<unknown> = Promise.resolve()
  let inFlight = 0
  const run = () => {
    inFlight++
    const p = last.then(task)
    last = p.catch(onError).finally(() => { inFlight-- })
    return p
  }
  const timer = setInterval(() => { if (inFlight === 0) run().catch(() => {}) }, ms)
  timer.unref()
  shutdown.defer(() => { clearInterval(timer); return last })
  return run
}

/**
 * The boot's loading, in the order it needs: the journal's leftovers into Postgres, then Postgres
 * into memory (tenants, numbers, every live session, opt-outs, pool levels, the façade's callback
 * URLs). Nothing listens, and no other node is heard, before the engine holds every live session:
 * no request is answered, readiness included, while routes are missing.
 */
async function load(g: ServiceGraph): Promise<number> {
  const { cfg, log, db, engine, records } = g
  if (g.leftovers.batches.length > 0) {
    await records.replay(g.leftovers.batches) // its events go out through the hub as any commit's (and are in the outbox)
    for (const f of g.leftovers.files) await unlink(f).catch(() => {})
    log.info({ batches: g.leftovers.batches.length }, 'journal replayed')
  }
  await seedNumbers(db.pool, cfg.numberPool, cfg.provider)
  // docs/scaling.md: the reconciliation sweep starts from what the load below sees.
  const changesFrom = await sessionChangeWatermark(db.pool)
  const rebuildAt = performance.now() // the boot's phases are logged ('boot'): where a slow boot goes
  await g.tenants.loadAll()
  const numbers = await loadNumbers(db.pool)
  engine.addNumbers(numbers.map(n => ({ number: n.number as E164, region: n.region, provider: n.provider, releasedAt: n.releasedAt, lastTenantId: n.lastTenantId, boundTenantId: n.boundTenantId })))
  const sessionsAt = performance.now()
  // One binary COPY, decoded and decrypted a batch at a time (sql/session-load.ts).
  engine.reserve(await countLiveSessions(db.pool))
  const liveSessions = await loadLiveSessions(db.pool, g.cipher, (recs, extras) => { for (let i = 0; i < recs.length; i++) engine.load(recs[i]!, extras[i]) })
  const loadedAt = performance.now()
  const gcMs = collectGarbage() // the load's garbage, now rather than seconds into serving (gateway/heap.ts)
  log.info({
    liveSessions,
    ms: { database: Math.round(rebuildAt - g.t0), tenantsAndNumbers: Math.round(sessionsAt - rebuildAt), sessions: Math.round(loadedAt - sessionsAt), gc: Math.round(gcMs) },
    heapMiB: Math.round(process.memoryUsage().heapUsed / 2 ** 20),
  }, 'boot')
  await g.optOuts.load() // contract D11: every opted-out party in memory before anything is served
  await g.poolAlerts.start()
  await g.facade.load()
  g.reconciler?.start(changesFrom)
  g.bus.start()
  return liveSessions
}

/** Makes a built graph serve: the boot's loading, then the listener (startService is build + start). */
export async function start(g: ServiceGraph, shutdown: ShutdownStack): Promise<RunningService> {
  const { cfg, log, now, db, engine, records, runner, http, stream, metrics, state } = g
  const liveSessions = await load(g)
  const warn = (code: string) => () => { log.warn({ code }, 'recoverable error') }
  // What the bus lost (a Redis outage) or SQL edited by hand reaches the directory within this.
  every(TENANT_RESYNC_MS, shutdown, () => g.tenants.resync(), warn('tenant-resync'))
  if (g.reconciler) void g.reconciler.sweep() // what was committed between the boot load and the bus reader's start
  // Façade sessions expire by a sweep too (their native sessions carry no timers of their own).
  every(FACADE_SWEEP_MS, shutdown, () => g.facade.expireDue(), warn('twilio-proxy-sweep'))

  const port = g.listener.port = await http.listen(cfg.host, cfg.port)
  // Before any request is read: uWS serves them from later turns of the event loop.
  if (cfg.publicBaseUrl === null) g.services.config.publicBaseUrl = listenerUrl(cfg.host, port)
  // WebSocket clients get 1001 at once; requests in flight get SHUTDOWN_GRACE_SECONDS. Then one
  // turn of the event loop's check phase: a voice fetch answers first and queues its call record
  // in a setImmediate (api/cpaas/callbacks/voice.ts), so a stop that began in the turn of an answer
  // (nothing in flight) would otherwise close the record writer (stopped after this) before that
  // record reached it (test/durability/drain-last-call.test.ts).
  const closeHttp = once(async () => {
    stream.closeAll()
    await http.close(cfg.shutdownGraceSeconds * 1000)
    await new Promise<void>(resolve => setImmediate(resolve))
  })
  shutdown.defer(closeHttp)
  Object.assign(metrics.sources, {
    liveSessions: () => engine.size(),
    poolCounts: () => engine.poolCounts(now()),
    recordWriter: () => records.stats(),
    recordFlush: async () => {
      const t = performance.now()
      return await orAfter(records.flush(), 1_000, 'late') === 'late' ? 1 : (performance.now() - t) / 1000
    },
    outboxBacklog: () => orAfter(db.pool.oneFirst(outboxBacklog).then(Number), 1_000, NaN),
    streamClients: () => stream.connectionCount(),
    breakers: g.services.cpaasHealth,
    poolAlertLevel: region => g.poolAlerts.level(region),
    createBatches: () => createBatchStats(db.pool),
  } satisfies typeof metrics.sources)

  // Sessions that expired while the process was down expire now, once (the database decides).
  const expireDue = every(EXPIRY_SWEEP_MS, shutdown, () => runner.expireDue(), warn('expiry-sweep'))
  await expireDue()
  g.dispatcher.start()
  shutdown.defer(() => g.dispatcher.stop())
  // Daily housekeeping: retention (contract 8.7) and number rental usage (contract D7).
  const daily = setInterval(() => {
    void purgeOldRecords(db.pool, cfg.retentionDays).catch(warn('retention'))
    void recordNumberRentals(db.pool, now()).catch(warn('number-rental'))
  }, DAY_MS)
  daily.unref()
  shutdown.defer(() => clearInterval(daily))

  state.readiness = 'ready'
  const ms = Math.round(performance.now() - g.t0)
  log.info({ port, metricsPort: g.metricsPort, db: db.kind, bus: g.bus.kind, provider: cfg.provider, signature: cfg.signature, liveSessions, bootMs: ms }, 'listening')
  return {
    port,
    url: listenerUrl(cfg.host, port),
    log,
    engine,
    services: g.services,
    tenants: g.tenants,
    db,
    boot: { ms, liveSessions },
    expireDue,
    flushRecords: () => records.flush(),
    metrics,
    metricsPort: g.metricsPort,
    poolAlerts: g.poolAlerts,
    readiness: () => state.readiness,
    async close() {
      if (state.readiness !== 'draining') {
        state.readiness = 'draining'
        // What the drain starts with: the requests answered while it runs, and the record
        // operations that must reach Postgres before the exit (the SIGTERM test reads this line).
        log.info({ inFlight: http.inFlight(), recordsPending: records.stats().pending }, 'draining')
      }
      const t = performance.now()
      void closeHttp() // the listener closes now, not after the steps deferred after it
      await shutdown.run()
      log.info({ ms: Math.round(performance.now() - t), recordsPending: records.stats().pending }, 'drained')
    },
  }
}
