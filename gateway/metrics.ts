// Prometheus metrics (docs/operations.md): `GET /metrics` in the text format on a listener of its own
// (METRICS_PORT, on HOST), so scraping never queues behind API traffic and the port can stay
// private. Values that exist anyway (live sessions, pool counts, the record writer's queue, the
// breakers) are read on scrape through `collect()`; what happens per request is counted into
// preallocated arrays, no label object and no hash per request.
//
// Labels never carry an id, a number or a secret: route patterns (`/v1/sessions/:id`), status
// classes, region and provider names, states and outcomes from fixed lists.
import { createServer, type Server } from 'node:http'
import { collectDefaultMetrics, Counter, Gauge, Registry } from 'prom-client'
import type { PoolCount } from '../engine/engine.js'
import { regionCounts } from '../engine/pool-alerts.js'
import type { BatchStats } from '../sql/create-batcher.js'
import { EVENT_TYPES, type EventEnvelope } from '../sql/vocabulary/event-envelope.js'

/** Upper bounds of the request latency histogram, in seconds. */
export const LATENCY_BUCKETS: readonly number[] = [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]
const CLASSES = ['1xx', '2xx', '3xx', '4xx', '5xx'] as const
const NB = LATENCY_BUCKETS.length

/** Per route pattern: for each status class, count, sum and bucket counts (not cumulative). */
interface RouteSlot { route: string; count: Float64Array; sum: Float64Array; buckets: Float64Array }

/**
 * Request count and latency by route pattern and status class, as one Prometheus histogram
 * (`_count` is the request count). `observe` is what gateway/http/app.ts `finish()` calls.
 */
export class RequestMetrics {
  readonly #slots = new Map<string | null, RouteSlot>()
  constructor(routes: Iterable<string> = []) {
    for (const r of routes) this.#slot(r)
  }
  #slot(route: string | null): RouteSlot {
    let s = this.#slots.get(route)
    if (!s) {
      // Unmatched paths (404) are one label: the URL is never a label.
      s = { route: route ?? 'unmatched', count: new Float64Array(5), sum: new Float64Array(5), buckets: new Float64Array(5 * NB) }
      this.#slots.set(route, s)
    }
    return s
  }
  /** One answered request: its route pattern (null: no route), status, and microseconds taken. */
  observe(route: string | null, status: number, us: number): void {
    const s = this.#slots.get(route) ?? this.#slot(route)
    let c = (status / 100) | 0
    c = c < 1 ? 0 : c > 5 ? 4 : c - 1 // 499 (client gone) is 4xx
    const sec = us / 1e6
    s.count[c]!++
    s.sum[c]! += sec
    let b = 0
    while (b < NB && sec > LATENCY_BUCKETS[b]!) b++
    if (b < NB) s.buckets[c * NB + b]!++
  }
  /** The prom-client metric shape (registered with `registerMetric`). */
  metric(name = 'maskline_http_request_duration_seconds') {
    const slots = this.#slots
    return {
      name,
      help: 'HTTP requests by route pattern and status class: latency from the request to its answer written (_count: requests)',
      type: 'histogram',
      aggregator: 'sum',
      labelNames: ['route', 'status_class'],
      reset() { /* counts since start */ },
      get() {
        const values: Array<{ labels: Record<string, string | number>; value: number; metricName: string }> = []
        for (const s of slots.values()) {
          for (let c = 0; c < 5; c++) {
            if (s.count[c] === 0) continue
            const cls = CLASSES[c]!
            let acc = 0
            for (let b = 0; b < NB; b++) {
              acc += s.buckets[c * NB + b]!
              values.push({ labels: { route: s.route, status_class: cls, le: LATENCY_BUCKETS[b]! }, value: acc, metricName: `${name}_bucket` })
            }
            values.push({ labels: { route: s.route, status_class: cls, le: '+Inf' }, value: s.count[c]!, metricName: `${name}_bucket` })
            values.push({ labels: { route: s.route, status_class: cls }, value: s.sum[c]!, metricName: `${name}_sum` })
            values.push({ labels: { route: s.route, status_class: cls }, value: s.count[c]!, metricName: `${name}_count` })
          }
        }
        return { name, help: this.help, type: 'histogram', values, aggregator: 'sum' }
      },
    }
  }
}

/** What a callback handler decided (api/cpaas/callbacks/context.ts OUTCOME). */
export type CallbackOutcome = 'routed' | 'rejected' | 'expired_behaviour' | 'unknown_proxy'
export type CallbackCounter = (channel: 'voice' | 'sms', outcome: CallbackOutcome) => void

/** Read on scrape: each source is optional (a test wires what it has). */
export interface MetricSources {
  liveSessions?: () => number
  poolCounts?: () => PoolCount[]
  recordWriter?: () => { pending: number; spilled: number; retries: number; refused: number }
  /** Seconds until what is queued now is in Postgres (the writer's flush), bounded. */
  recordFlush?: () => Promise<number>
  outboxBacklog?: () => Promise<number>
  streamClients?: () => number
  breakers?: () => Array<{ name: string; state: 'CLOSED' | 'OPEN' | 'HALF_OPEN' }>
  /** 1 when the service takes traffic (the readiness route's answer). */
  ready?: () => boolean
  /** contract D12: the pool alert level of a region (0 ok, 1 below 20 % free, 2 below 10 %, 3 below 5 %). */
  poolAlertLevel?: (region: string) => number
  /** How session creates reached Postgres since start (sql/create-batcher.ts); null: a connection that does not batch. */
  createBatches?: () => Readonly<BatchStats> | null
}

export interface ServiceMetrics {
  registry: Registry
  requests: RequestMetrics
  callback: CallbackCounter
  /** The webhook dispatcher's attempt outcomes. */
  webhook(outcome: 'delivered' | 'retry' | 'failed' | 'skipped' | 'error'): void
  /** A WebSocket client closed; `code` is its close code. */
  streamClosed(code: number): void
  /** contract D12: a create refused with 503 pool-exhausted. */
  poolExhausted(): void
  /** Outbox events this node committed (the event hub's records, session and events). */
  committed(events: readonly EventEnvelope[]): void
  /** Sources read on scrape; set once the service has them. */
  sources: MetricSources
}

const BREAKER_STATES = ['CLOSED', 'OPEN', 'HALF_OPEN'] as const

export function createServiceMetrics(o: { routes?: Iterable<string>; defaults?: boolean } = {}): ServiceMetrics {
  const registry = new Registry()
  const sources: MetricSources = {}
  if (o.defaults !== false) collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: 20 })
  const requests = new RequestMetrics(o.routes)
  registry.registerMetric(requests.metric() as never)

  const callbacks = new Counter({
    name: 'maskline_callbacks_total', help: 'Provider callbacks by channel and routing outcome (expired_behaviour: no live session, the tenant\'s expired behaviour applied)',
    labelNames: ['channel', 'outcome'], registers: [registry],
  })
  // Pre-bound children: a callback costs one property read and one increment.
  const cbChildren: Record<string, { inc(): void }> = {}
  for (const ch of ['voice', 'sms'] as const) {
    for (const out of ['routed', 'rejected', 'expired_behaviour', 'unknown_proxy'] as const) {
      const child = callbacks.labels(ch, out)
      child.inc(0)
      cbChildren[`${ch}:${out}`] = child
    }
  }
  const webhooks = new Counter({
    name: 'maskline_webhook_attempts_total', help: 'Webhook delivery attempts on this node by outcome (retry: failed, retried later; failed: given up)',
    labelNames: ['outcome'], registers: [registry],
  })
  for (const out of ['delivered', 'retry', 'failed', 'skipped', 'error']) webhooks.labels(out).inc(0)
  const closes = new Counter({
    name: 'maskline_stream_closes_total',
    help: 'WebSocket stream clients closed, by reason (abnormal: the connection dropped without a close frame, which is how a slow client past the backpressure limit is dropped)',
    labelNames: ['reason'], registers: [registry],
  })
  for (const r of ['shutdown', 'token_expired', 'abnormal', 'normal', 'other']) closes.labels(r).inc(0)
  const exhausted = new Counter({
    name: 'maskline_pool_exhausted_total', help: 'Session creates refused on this node with 503 pool-exhausted (no proxy number could carry the session)',
    registers: [registry],
  })

  const committed = new Counter({
    name: 'maskline_events_committed_total',
    help: 'Events committed on this node by type (each goes to the WebSocket stream, the other nodes and the webhook dispatcher)',
    labelNames: ['type'], registers: [registry],
  })
  const committedByType = new Map<string, { inc(): void }>()
  for (const type of EVENT_TYPES) {
    const child = committed.labels(type)
    child.inc(0)
    committedByType.set(type, child)
  }

  const gauge = (name: string, help: string, labelNames: string[], collect: (g: Gauge) => void | Promise<void>) =>
    new Gauge({ name, help, labelNames, registers: [registry], collect() { return collect(this) } })

  gauge('maskline_ready', 'Readiness: 1 when the service takes traffic, 0 while booting or draining', [], g => { g.set(sources.ready?.() ? 1 : 0) })
  gauge('maskline_live_sessions', 'Live sessions held by the engine on this node', [], g => { if (sources.liveSessions) g.set(sources.liveSessions()) })
  gauge('maskline_proxy_numbers', 'Proxy numbers by region, provider and state', ['region', 'provider', 'state'], g => {
    g.reset()
    for (const p of sources.poolCounts?.() ?? []) {
      g.labels(p.region, p.provider, 'available').set(p.available)
      g.labels(p.region, p.provider, 'in_use').set(p.inUse)
      g.labels(p.region, p.provider, 'cooldown').set(p.cooldown)
    }
  })
  // contract D12: the free share (available / total: neither in use nor cooling down) and the alert
  // level each region is at (api/app/pool-alerts.ts); labels are region names, never a number.
  gauge('maskline_pool_free_ratio', 'Free share of the proxy numbers of a region (available / total), 0 to 1', ['region'], g => {
    g.reset()
    for (const r of regionCounts(sources.poolCounts?.() ?? [])) if (r.total > 0) g.labels(r.region).set(r.available / r.total)
  })
  gauge('maskline_pool_alert_level', 'Pool alert level of a region: 0 ok, 1 below 20 % free, 2 below 10 %, 3 below 5 % (back to 0 above 25 %)', ['region'], g => {
    g.reset()
    for (const r of regionCounts(sources.poolCounts?.() ?? [])) g.labels(r.region).set(sources.poolAlertLevel?.(r.region) ?? 0)
  })
  gauge('maskline_record_writer_pending', 'Call and SMS record operations answered for and not yet in Postgres (spilled: held only in the journal)', ['where'], g => {
    const s = sources.recordWriter?.()
    if (!s) return
    g.labels('memory').set(s.pending - s.spilled)
    g.labels('journal').set(s.spilled)
  })
  gauge('maskline_record_writer_retries', 'Record writer applies that failed and were retried, since start', [], g => { const s = sources.recordWriter?.(); if (s) g.set(s.retries) })
  gauge('maskline_record_writer_refused', 'Record operations refused by the writer since start', [], g => { const s = sources.recordWriter?.(); if (s) g.set(s.refused) })
  gauge('maskline_record_writer_flush_seconds', 'Seconds, measured at scrape, until every record operation queued then was in Postgres (capped at 1 s)', [], async g => {
    if (sources.recordFlush) g.set(await sources.recordFlush())
  })
  gauge('maskline_outbox_backlog', 'Webhook outbox events not yet delivered or given up (all tenants)', [], async g => {
    if (sources.outboxBacklog) g.set(await sources.outboxBacklog().catch(() => NaN))
  })
  // Creates batch only while another is at the database (sql/create-batcher.ts): the mean batch is
  // batched / batch statements; undone batches (a refusal inside) cost their creates a second try.
  new Counter({
    name: 'maskline_session_create_statements_total',
    help: 'Session create statements sent to Postgres by kind: alone (one create; with an Idempotency-Key, its own transaction), batch (several, all written), batch_undone (several, none written: each then ran alone)',
    labelNames: ['kind'], registers: [registry],
    collect() {
      const s = sources.createBatches?.()
      this.reset()
      if (!s) return
      this.labels('alone').inc(s.alone)
      this.labels('batch').inc(s.batches)
      this.labels('batch_undone').inc(s.undone)
    },
  })
  new Counter({
    name: 'maskline_session_creates_batched_total', help: 'Session creates written by a batch statement (the rest went alone)', registers: [registry],
    collect() {
      const s = sources.createBatches?.()
      this.reset()
      if (s) this.inc(s.batched)
    },
  })
  gauge('maskline_stream_clients', 'WebSocket stream clients connected to this node', [], g => { if (sources.streamClients) g.set(sources.streamClients()) })
  gauge('maskline_circuit_breaker_state', 'Telephony provider circuit breakers: 1 on the current state', ['provider', 'state'], g => {
    g.reset()
    for (const b of sources.breakers?.() ?? []) for (const s of BREAKER_STATES) g.labels(b.name, s).set(b.state === s ? 1 : 0)
  })

  return {
    registry,
    requests,
    sources,
    callback: (ch, out) => cbChildren[`${ch}:${out}`]!.inc(),
    webhook: out => webhooks.labels(out).inc(),
    poolExhausted: () => exhausted.inc(),
    committed: events => { for (const e of events) committedByType.get(e.type)?.inc() },
    streamClosed(code) {
      closes.labels(code === 1001 ? 'shutdown' : code === 1008 ? 'token_expired' : code === 1006 ? 'abnormal' : code === 1000 ? 'normal' : 'other').inc()
    },
  }
}

export interface MetricsServer {
  port: number
  close(): Promise<void>
}

/** `GET /metrics` on its own node:http listener; anything else is 404. */
export function listenMetrics(registry: Registry, host: string, port: number): Promise<MetricsServer> {
  const server: Server = createServer((req, res) => {
    if (req.method !== 'GET' || (req.url !== '/metrics' && !req.url?.startsWith('/metrics?'))) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n')
      return
    }
    registry.metrics().then(
      text => res.writeHead(200, { 'content-type': registry.contentType }).end(text),
      () => res.writeHead(500, { 'content-type': 'text/plain' }).end('metrics unavailable\n'),
    )
  })
  server.keepAliveTimeout = 65_000
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, () => {
      server.off('error', reject)
      const addr = server.address()
      resolve({
        port: typeof addr === 'object' && addr ? addr.port : port,
        close: () => new Promise<void>(r => { server.close(() => r()); server.closeAllConnections() }),
      })
    })
  })
}
