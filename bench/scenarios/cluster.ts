// The two-node step (docs/scaling.md): two service processes on one Postgres and one Redis, as
// docs/scaling.md runs them (distinct ports, the same secrets: a token or a number works on both).
//   1. voice on one node: node 1 alone (its bus on, nobody reading), 32 connections;
//   2. propagation: a session created through node 1's API → routable on node 2, i.e. node 2's
//      voice callback from the agent to the proxy answers a <Dial> (polled without pause, as
//      test/cluster/two-node.test.ts does), over paced creates;
//   3. stream: a burst of creates on node 1 (wrk, 8 connections); node 2's live-session count
//      (its /metrics gauge) shows how fast it applies them, the stream ids how fast entries went on;
//   4. voice on two nodes: the same 32 connections, 16 on each node.
// Both nodes run on the server core, the load generator on the other one: the two configurations
// have the same CPU, so two_vs_one is what splitting one core's work over two nodes costs (each
// call's call.incoming event crosses the bus to the other node); on N cores the N nodes would get
// N × that. Node 2 starts after the one-node run, so that run has no reader on the bus.
import { join } from 'node:path'
import { Redis } from 'ioredis'
import { sql } from 'slonik'
import { busStreamName } from '../../gateway/bus.js'
import { CallbackDriver } from '../../test/support/callback-driver.js'
import type { BenchDatabase } from '../lib/database.js'
import { failureShare, runLoad, type LoadResult } from '../lib/loadgen.js'
import type { Credential } from '../lib/population.js'
import { cpuSeconds, cpuSnapshot, freePort, quiesce, sleep } from '../lib/proc.js'
import { freshNumber, writeCreateFile } from '../lib/requests.js'
import { progress } from '../lib/results.js'
import type { Ctx } from './common.js'
import { preflight } from './preflight.js'
import { fetchTokens } from './rest.js'
import { startService, type Service } from './service.js'
import { voiceFiles } from './voice.js'

/** Why the step cannot run here, or null. */
export function twoNodeSkip(databaseUrl: string | undefined): string | null {
  if (!process.env.REDIS_URL) return 'needs REDIS_URL (the bus between nodes); without it there is one node'
  if (!databaseUrl) return 'needs DATABASE_URL: embedded PGlite (DATA_DIR) is single-process, two nodes cannot share it'
  return null
}

const percentile = (xs: readonly number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))] ?? Number.NaN
}

async function liveSessions(metricsPort: number): Promise<number> {
  const res = await fetch(`http://127.0.0.1:${metricsPort}/metrics`)
  const text = await res.text()
  const m = /^maskline_live_sessions (\d+)/m.exec(text)
  if (!m) throw new Error(`no maskline_live_sessions on :${metricsPort}/metrics`)
  return Number(m[1])
}

async function settleAll(ctx: Ctx, label: string, pids: readonly number[]): Promise<void> {
  if (ctx.opts.smoke) return
  for (const pid of pids) {
    const q = await quiesce(pid, 30_000, 0.25)
    if (!q.idle) ctx.results.note(`${label}: a node was still busy after ${Math.round(q.waitedMs / 1000)} s; measured anyway`)
  }
}

interface VoiceRun { rps: number; p99: number; servicePerReq: number; postgresPerReq: number; failures: number }

/** One voice run spread over `nodes` (connections split evenly), with the CPU of every node. */
async function voiceRun(ctx: Ctx, name: string, nodes: readonly Service[], files: ReadonlyArray<{ file: string; warmFile: string }>): Promise<VoiceRun> {
  const conns = Math.max(1, Math.floor(ctx.opts.connections / nodes.length))
  await settleAll(ctx, name, nodes.map(n => n.pid))
  if (ctx.opts.warmup > 0) {
    progress(`${name}: warm-up ${ctx.opts.warmup} s`)
    await Promise.all(nodes.map((n, i) => runLoad(ctx.gen, ctx.pin, { url: n.url, file: files[i]!.warmFile, connections: conns, durationS: ctx.opts.warmup })))
  }
  progress(`${name}: ${conns} connections on each of ${nodes.length} node(s), ${ctx.opts.duration} s`)
  const snap0 = cpuSnapshot(nodes[0]!.pid)
  const others0 = nodes.slice(1).map(n => cpuSeconds(n.pid))
  const runs: LoadResult[] = await Promise.all(nodes.map((n, i) => runLoad(ctx.gen, ctx.pin, { url: n.url, file: files[i]!.file, connections: conns, durationS: ctx.opts.duration })))
  const snap1 = cpuSnapshot(nodes[0]!.pid)
  const others1 = nodes.slice(1).map(n => cpuSeconds(n.pid))
  const seconds = (snap1.at - snap0.at) / 1000
  const rps = runs.reduce((a, r) => a + r.okRps, 0)
  const serviceCpu = (snap1.service - snap0.service) + others1.reduce((a, c, i) => a + (c - others0[i]!), 0)
  const failures = Math.max(...runs.map(failureShare))
  return {
    rps,
    p99: Math.max(...runs.map(r => r.latencyUs.p99)),
    // CPU seconds over the run / requests answered in it (the run's wall time is the load's).
    servicePerReq: (serviceCpu / seconds) * 1e6 / rps,
    postgresPerReq: ((snap1.postgres - snap0.postgres) / seconds) * 1e6 / rps,
    failures,
  }
}

function reportVoice(ctx: Ctx, name: string, v: VoiceRun): void {
  const r = ctx.results
  if (v.failures > 0.001) r.note(`${name}: ${(v.failures * 100).toFixed(2)} % of responses failed or were not 2xx/3xx; throughput counts 2xx/3xx only`)
  r.figure(`${name}.rps`, v.rps, 'req/s')
  r.figure(`${name}.p99`, v.p99, 'us')
  r.figure(`${name}.cpu_per_req.service`, v.servicePerReq, 'us')
  r.figure(`${name}.cpu_per_req.postgres`, v.postgresPerReq, 'us')
}

/** The nodes' bus stream: named after the bench database's instance id (gateway/bus.ts). */
async function busStream(db: BenchDatabase): Promise<string> {
  const d = await db.open({ maximumPoolSize: 1 })
  try {
    return busStreamName(await d.pool.oneFirst(sql.unsafe`SELECT id::text FROM instance`) as string)
  } finally {
    await d.close()
  }
}

export async function twoNodeScenario(ctx: Ctx, db: BenchDatabase, creds: readonly Credential[]): Promise<void> {
  const r = ctx.results
  const redisUrl = process.env.REDIS_URL!
  const smoke = ctx.opts.smoke
  const S = 'two nodes'
  // Each node its own metrics port (the default 9464 would be taken by the first); the periodic
  // sweep left at its default: the bus, not the sweep, is what is measured.
  const metrics1 = await freePort()
  const n1 = await startService({ ...ctx, logPrefix: `${ctx.logPrefix}.node1` }, db, { name: 'cluster-1', signature: 'none', env: { METRICS_PORT: String(metrics1) } })
  let n2: Service | null = null
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: 1 })
  redis.on('error', () => {})
  try {
    r.figure('cluster.boot.node1.ms', n1.bootMs, 'ms')
    const tokens = await fetchTokens(n1, creds)

    // 1. One node.
    const one = voiceFiles(ctx, 'none', n1.url, 'cluster-one')
    if (await preflight(ctx, 'cluster.voice.one_node', n1.url, one.warmFile, { status: 200, body: /<Dial/ })) {
      reportVoice(ctx, 'cluster.voice.one_node', await voiceRun(ctx, 'cluster.voice.one_node', [n1], [one]))
    }

    // Node 2: same database, Redis and secrets (serviceEnv), its own ports.
    const metrics2 = await freePort()
    n2 = await startService({ ...ctx, logPrefix: `${ctx.logPrefix}.node2` }, db, { name: 'cluster-2', signature: 'none', env: { METRICS_PORT: String(metrics2) } })
    r.figure('cluster.boot.node2.ms', n2.bootMs, 'ms')
    const node2 = n2

    // 2. Propagation: node 1's 201 → node 2 answers a <Dial> for the new session.
    {
      const driver2 = new CallbackDriver({ baseUrl: node2.url, mode: 'none' })
      const warm = smoke ? 3 : 10
      const count = smoke ? 20 : 200
      const delays: number[] = []
      let probes = 0
      await settleAll(ctx, 'cluster.propagation', [n1.pid, node2.pid])
      progress(`cluster.propagation: ${count} creates on node 1 (+${warm} warm-up), each polled on node 2 until it routes`)
      for (let k = 0; k < warm + count; k++) {
        const agent = freshNumber(707, 100_000 + k)
        const res = await fetch(`${n1.url}/v1/sessions`, {
          method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${tokens[k % tokens.length]}` },
          body: JSON.stringify({ agentPhone: agent, customerPhone: freshNumber(707, 200_000 + k) }),
        })
        const body = await res.text()
        if (res.status !== 201) throw new Error(`create on node 1: ${res.status} ${body.slice(0, 200)}`)
        const t0 = performance.now()
        const proxy = (JSON.parse(body) as { proxyNumber: string }).proxyNumber
        for (let n = 0; ; n++) {
          const v = await driver2.voice({ from: agent, to: proxy, callSid: `cluster-prop-${k}-${n}` })
          const text = await v.text()
          probes++
          if (v.status === 200 && text.includes('<Dial')) break
          if (performance.now() - t0 > 5_000) throw new Error(`a session created on node 1 was not routable on node 2 after 5 s (last answer ${v.status} ${text.slice(0, 160)})`)
        }
        if (k >= warm) delays.push(performance.now() - t0)
        await sleep(10) // paced: one create at a time, the next after a pause
      }
      r.figure('cluster.propagation.p50', Math.round(percentile(delays, 50) * 1000), 'us')
      r.figure('cluster.propagation.p99', Math.round(percentile(delays, 99) * 1000), 'us')
      r.figure('cluster.propagation.max', Math.round(Math.max(...delays) * 1000), 'us')
      progress(`cluster.propagation: ${delays.length} creates, ${probes} probes of node 2 in all`)
      const p99 = r.get('cluster.propagation.p99')
      r.target(S, 'created on node 1 → routable on node 2: p99 ≤ 20 ms', p99 === undefined ? null : p99 <= 20_000,
        p99 === undefined ? 'not measured' : `p99 ${(p99 / 1000).toFixed(1)} ms over ${delays.length} paced creates (node 1's 201 → node 2's first <Dial>)`)
    }

    // 3. Stream: a burst of creates on node 1; node 2's live sessions show when it applied them.
    {
      const file = join(ctx.work, 'cluster-burst.req')
      const seconds = smoke ? 1 : 3
      writeCreateFile(file, smoke ? 2_000 : 20_000, ctx.pop, tokens, 3_000_000)
      await settleAll(ctx, 'cluster.stream', [n1.pid, node2.pid])
      const before1 = await liveSessions(metrics1)
      const before2 = await liveSessions(metrics2)
      const samples: Array<{ t: number; live2: number }> = []
      let polling = true
      const poller = (async () => {
        while (polling) {
          samples.push({ t: Date.now(), live2: await liveSessions(metrics2).catch(() => Number.NaN) })
          await sleep(20)
        }
      })()
      progress(`cluster.stream: creates on node 1 for ${seconds} s (8 connections); node 2's /metrics polled every 20 ms`)
      const t0 = Date.now()
      const burst = await runLoad(ctx.gen, ctx.pin, { url: n1.url, file, connections: 8, durationS: seconds })
      const t1 = Date.now()
      const created = (await liveSessions(metrics1)) - before1
      // Node 2 has applied the burst when its count rose by as much as node 1's.
      polling = false
      await poller
      let caughtUp = samples.find(x => x.live2 - before2 >= created)?.t ?? Number.NaN
      for (const deadline = Date.now() + 15_000; !Number.isFinite(caughtUp) && Date.now() < deadline; await sleep(2)) {
        const live2 = await liveSessions(metrics2)
        samples.push({ t: Date.now(), live2 })
        if (live2 - before2 >= created) caughtUp = Date.now()
      }
      if (failureShare(burst) > 0.001) r.note(`cluster.stream: ${(failureShare(burst) * 100).toFixed(2)} % of the burst's creates failed (status ${burst.errors.status}, timeout ${burst.errors.timeout})`)
      if (!Number.isFinite(caughtUp)) {
        r.note(`cluster.stream: node 2 did not apply node 1's ${created} creates within 15 s of the burst (${(samples.at(-1)?.live2 ?? before2) - before2} seen)`)
      } else {
        // From the burst's start to node 2 holding every session of it: what node 2 applied per second.
        r.figure('cluster.stream.changes_per_s', created / ((caughtUp - t0) / 1000), 'changes/s')
        r.figure('cluster.stream.node1_creates_per_s', created / ((t1 - t0) / 1000), 'creates/s')
        r.figure('cluster.stream.catch_up_ms', Math.max(0, caughtUp - t1), 'ms')
      }
      // What went on the stream meanwhile: entries (session changes and event envelopes) by their ids' times.
      const entries = await redis.xrange(await busStream(db), `${t0}-0`, `${t1}-18446744073709551615`)
      let sessionMsgs = 0
      for (const [, f] of entries) {
        try { if ((JSON.parse(f[3] ?? '') as { kind?: string }).kind === 'session') sessionMsgs++ } catch { /* not ours */ }
      }
      r.figure('cluster.stream.entries_per_s', entries.length / ((t1 - t0) / 1000), 'entries/s')
      if (sessionMsgs > 0) r.figure('cluster.stream.entries_per_change', entries.length / sessionMsgs, 'ratio')
      progress(`cluster.stream: ${created} sessions created on node 1 in ${t1 - t0} ms; ${entries.length} stream entries (${sessionMsgs} session changes), node 2 caught up ${Number.isFinite(caughtUp) ? `${caughtUp - t1} ms after the burst` : 'not within 15 s'}`)
    }

    // 4. Two nodes: the same load spread over both.
    const a = voiceFiles(ctx, 'none', n1.url, 'cluster-two-a')
    const b = voiceFiles(ctx, 'none', node2.url, 'cluster-two-b')
    if (await preflight(ctx, 'cluster.voice.two_nodes', node2.url, b.warmFile, { status: 200, body: /<Dial/ })) {
      reportVoice(ctx, 'cluster.voice.two_nodes', await voiceRun(ctx, 'cluster.voice.two_nodes', [n1, node2], [a, b]))
    }
    r.ratio('cluster.voice.two_vs_one', 'cluster.voice.two_nodes.rps', 'cluster.voice.one_node.rps')
    r.note('cluster.voice: both nodes run on the same server core (the load generator on the other of this machine\'s 2 cores): two_vs_one compares the same CPU split over two nodes with one node, not two machines; cpu_per_req.service sums both nodes')
  } finally {
    redis.disconnect()
    await n2?.stop()
    await n1.stop()
  }
}
