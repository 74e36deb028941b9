// The soak (`npm run bench -- --only soak --minutes N`): two nodes on a Postgres and a Redis of
// their own (a private cluster and redis-server, test/support/, so the restarts below never touch
// a shared server), a steady mix (bench/lib/soak-load.ts) for N minutes, one Redis restart at 35 %
// of the run and one Postgres restart at 65 %. Sampled every 5 s, reported per minute (a table in
// bench/results/soak.md, `bench: soak.*` figures) and judged:
//   - RSS and heap low point of each node after warm-up flat within 10 % (no leak);
//   - voice and REST p99 (client side, outside the restarts' windows) of the last 5 minutes within
//     20 % of the first 5 after warm-up (halves of the run when it is shorter than 10 minutes);
//   - no acknowledged work lost: every answered call and SMS has its record, every event its
//     webhook delivery and its frame on every steady stream client (closed by a node, one resumes
//     with `after=` its largest id, as the SDK does: it owes every event of the run);
//   - no 5xx (nor a connection refused) outside the restarts' windows.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { sql } from 'slonik'
import { SUBSCRIBABLE_EVENTS } from '../../sql/vocabulary/event-envelope.js'
import { privateCluster } from '../../test/support/pg-cluster.js'
import { privateRedis } from '../../test/support/redis-server.js'
import { createBenchDatabase } from '../lib/database.js'
import { agentOf, customerOf, loadPopulation, sessionIdOf, tenantIdOf, tenantOfSession, proxyOf, type Population } from '../lib/population.js'
import { freePort, sleep } from '../lib/proc.js'
import { progress } from '../lib/results.js'
import { scaledRates, startSoakLoad, type LiveSession } from '../lib/soak-load.js'
import { startReceiverProcess } from '../lib/soak-receiver.js'
import { sampleNode, type NodeSample } from '../lib/soak-sample.js'
import { judgeSoak, minuteTable, type Window } from '../lib/soak-report.js'
import type { Ctx } from './common.js'
import { fetchTokens } from './rest.js'
import { ensureServiceBuilt, startService, type Service } from './service.js'

const SAMPLE_MS = 5_000
/** After a restart is over, how long its effects may still show (reconnects, retries). */
const RESTART_TAIL_MS = 20_000
/** How long the outbox may take to empty after the load stops. */
const DRAIN_MS = 180_000

export async function soakScenario(ctx: Ctx, minutes: number, scale: number): Promise<void> {
  const missing = ensureServiceBuilt()
  if (missing) { ctx.results.skip('soak', missing); return }
  const teardowns: Array<() => unknown> = []
  const td = { teardown: (fn: () => unknown) => { teardowns.unshift(fn) } }
  try {
    const pg = await privateCluster(td)
    if (!pg) { ctx.results.skip('soak', 'needs Postgres binaries under /usr/lib/postgresql and root or postgres to run a private cluster'); return }
    const redis = await privateRedis(td)
    const db = await createBenchDatabase(pg.url)
    td.teardown(() => db.dispose())
    const pop: Population = { sessions: 300, proxies: 200, tenants: 4, exchangeKeys: 0 }
    const sctx: Ctx = { ...ctx, pop }
    const d = await db.open({ maximumPoolSize: 2 })
    td.teardown(() => d.close())
    const loaded = await loadPopulation(d.pool, pop, Buffer.from(ctx.keys.phoneKey, 'base64'), progress)

    const nodes: Array<{ svc: Service; metrics: number; journal: string }> = []
    for (const name of ['soak-1', 'soak-2']) {
      const metrics = await freePort()
      const dataDir = mkdtempSync(join(tmpdir(), `maskline-${name}-`))
      td.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
      const svc = await startService({ ...sctx, logPrefix: `${ctx.logPrefix}.${name}` }, db, {
        name, signature: 'none',
        env: { METRICS_PORT: String(metrics), REDIS_URL: redis.url, WEBHOOK_ALLOW_INSECURE: 'true', DATA_DIR: dataDir },
      })
      td.teardown(() => svc.stop())
      nodes.push({ svc, metrics, journal: join(dataDir, 'journal') })
    }
    const tokens = await fetchTokens(nodes[0]!.svc, loaded.primary)
    const receiver = await startReceiverProcess()
    td.teardown(() => receiver.close())
    for (const token of tokens) {
      const res = await fetch(`${nodes[0]!.svc.url}/v1/webhooks`, {
        method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ url: receiver.url, events: SUBSCRIBABLE_EVENTS }),
      })
      if (res.status !== 201) throw new Error(`webhook registration: ${res.status} ${(await res.text()).slice(0, 200)}`)
      receiver.setSecret(((await res.json()) as { secret: string }).secret)
    }

    const sessions: LiveSession[] = Array.from({ length: pop.sessions }, (_, i) => ({
      id: sessionIdOf(i), tenant: tenantOfSession(i, pop), agent: agentOf(i), customer: customerOf(i), proxy: proxyOf(i, pop.proxies), created: false,
    }))
    const errors: string[] = []
    const started = Date.now()
    const load = startSoakLoad({ nodes: nodes.map(n => n.svc), tenants: pop.tenants, tokens, creds: loaded.primary, sessions, rates: scaledRates(scale), onError: e => errors.push(e) })
    progress(`soak: ${minutes} min at ${scale} × the mix's rates on two nodes (${nodes.map(n => n.svc.url).join(', ')}), Redis restart at 35 %, Postgres restart at 65 %`)

    const samples: Array<Array<NodeSample | null>> = [[], []]
    const pool: Array<{ at: number; conns: number }> = []
    const windows: Window[] = []
    const endAt = started + minutes * 60_000
    const restart = async (what: string, at: number, fn: () => Promise<void>) => {
      await sleep(Math.max(0, at - Date.now()))
      const w: Window = { what, from: Date.now(), to: Infinity }
      windows.push(w)
      progress(`soak: restarting ${what}`)
      await fn()
      w.to = Date.now() + RESTART_TAIL_MS
      progress(`soak: ${what} back after ${Date.now() - w.from} ms`)
    }
    const restarts = Promise.all([
      restart('Redis', started + minutes * 60_000 * 0.35, async () => { await redis.kill(); await sleep(2_000); await redis.start() }),
      restart('Postgres', started + minutes * 60_000 * 0.65, () => pg.restartFast()),
    ])
    for (let next = started + SAMPLE_MS; next <= endAt; next += SAMPLE_MS) {
      await sleep(Math.max(0, next - Date.now()))
      const got = await Promise.all(nodes.map(n => sampleNode(`http://127.0.0.1:${n.metrics}/metrics`, n.svc.pid, n.journal)))
      got.forEach((s, i) => samples[i]!.push(s))
      const conns = await d.pool.oneFirst(sql.unsafe`SELECT count(*)::int FROM pg_stat_activity WHERE datname = current_database()`).catch(() => Number.NaN)
      pool.push({ at: Date.now(), conns: conns as number })
      if ((next - started) % 60_000 === 0) progress(`soak: minute ${(next - started) / 60_000}: RSS ${got.map(s => s ? Math.round(s.rssBytes / 2 ** 20) : '?').join(' / ')} MiB, heap ${got.map(s => s ? Math.round(s.heapUsedBytes / 2 ** 20) : '?').join(' / ')} MiB`)
    }
    await load.stop()
    await restarts

    // Drained: nothing due in the outbox (every event delivered, given up, or waiting for a later
    // attempt of the retry schedule), then the frames settle.
    const drainFrom = Date.now()
    for (let backlog = 1; backlog > 0 && Date.now() - drainFrom < DRAIN_MS; ) {
      backlog = await d.pool.oneFirst(sql.unsafe`SELECT count(*)::int FROM outbox WHERE done_at IS NULL AND next_attempt_at <= now()`).catch(() => 1) as number
      if (backlog > 0) await sleep(1_000)
    }
    ctx.results.figure('soak.drain_ms', Date.now() - drainFrom, 'ms')
    await sleep(3_000)
    const calls = await d.pool.oneFirst(sql.unsafe`SELECT count(*)::int FROM call_records WHERE provider_call_id = ANY(${sql.array(load.answeredCalls, 'text')})`) as number
    const smsFound = new Set(await d.pool.anyFirst(sql.unsafe`SELECT provider_message_id FROM sms_records WHERE provider_message_id = ANY(${sql.array(load.answeredSms, 'text')})`) as string[])
    const sms = smsFound.size
    // What to look for in the nodes' logs (provider ids carry no phone number).
    const smsMissing = load.answeredSms.filter(id => !smsFound.has(id))
    if (smsMissing.length) ctx.results.note(`soak: answered SMS without a record: ${smsMissing.slice(0, 5).join(', ')}`)
    // A stream frame leaves a node STREAM_SETTLE_MS (1 s) after its commit, later behind a peer's:
    // an event committed in the last seconds before this read (an expiry during the drain) is not
    // owed to a client still connected; the 30-minute run of 2026-12-02 counted one as missing on
    // every steady client.
    const framesDueBefore = Date.now() - 3_000
    const events = await d.pool.any(sql.unsafe`
      SELECT id::text, tenant_id::text AS tenant, type, extract(epoch FROM created_at) * 1000 AS at, done_at IS NULL AS retrying FROM outbox
      WHERE created_at >= to_timestamp(${started / 1000})`) as ReadonlyArray<{ id: string; tenant: string; type: string; at: number; retrying: boolean }>
    const delivered = new Set(await receiver.acceptedIds())
    const subscribable = new Set<string>(SUBSCRIBABLE_EVENTS)
    // Not at the receiver: waiting for a later attempt (not lost), or done without it (lost).
    const missing = events.filter(e => subscribable.has(e.type) && !delivered.has(e.id))
    const undelivered = missing.filter(e => !e.retrying).length
    ctx.results.figure('soak.events_awaiting_retry', missing.length - undelivered, 'count')
    // Each steady client owes the frames of tenant 0's events made while it was connected (a
    // second of margin at each end of a span: the subscription is not instant).
    const streamed = events.filter(e => e.tenant === tenantIdOf(0))
    let owed = 0
    let unframed = 0
    const unframedIds: string[] = []
    load.steadyFrames.forEach((seen, i) => {
      for (const e of streamed) {
        if (e.at >= framesDueBefore || !load.steadySpans[i]!.some(s => e.at > s.from + 1_000 && e.at < s.to - 1_000)) continue
        owed++
        if (!seen.has(e.id)) { unframed++; if (unframedIds.length < 5) unframedIds.push(`client ${i}: ${e.type} ${e.id}`) }
      }
    })
    if (unframedIds.length) ctx.results.note(`soak: frames missing, e.g. ${unframedIds.join('; ')}`)
    load.close()

    const table = minuteTable(minutes, started, samples, pool, load.samples, windows)
    const failed = judgeSoak(ctx, {
      minutes, started, table, windows, samples: load.samples, errors,
      lost: { calls: load.answeredCalls.length - calls, answeredCalls: load.answeredCalls.length, sms: load.answeredSms.length - sms, answeredSms: load.answeredSms.length, undelivered, events: events.length, unframed, streamed: owed },
    })
    // A smoke's soak (CI) never overwrites the table of a recorded run.
    const file = join('bench', 'results', ctx.opts.smoke ? 'soak-smoke.md' : 'soak.md')
    writeFileSync(file, [`# Soak, ${minutes} min at ${scale} × the mix (${new Date(started).toISOString()})`, '', ...table.markdown, ''].join('\n'))
    progress(`soak: wrote ${file}`)
    if (failed.length) throw new Error(`soak: ${failed.join('; ')}`)
  } finally {
    for (const fn of teardowns) await Promise.resolve().then(fn).catch(err => progress(`soak: teardown: ${(err as Error).message}`))
  }
}
