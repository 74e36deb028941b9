// A stream client resuming a large backlog (`GET /v1/stream?after=<id>`, gateway/stream/resume.ts)
// while the node serves routed voice callbacks: the replay is paced by the socket's drain, a page
// a turn, so the callbacks keep their in-process latency (target: p99 < 1 ms, as bench/scenarios/
// voice.ts judges it, from the service's access log). Also reported: the event loop's delay p99
// over the replay (what a callback waits before its handler starts, which the access log does not
// see) and the replay's rate.
//   node --import tsx bench/stream-resume.bench.ts [--events 100000] [--concurrency 4]
// Embedded PGlite unless DATABASE_URL is set (then REDIS_URL too, as a node of a cluster would).
// The reader and the callback load run in a worker thread, off the service's event loop.
import { createWriteStream, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { monitorEventLoopDelay } from 'node:perf_hooks'
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads'
import { loadConfig } from '../gateway/config.js'
import { startService } from '../gateway/service.js'
import { buildEnvelope, type EventEnvelope } from '../sql/vocabulary/event-envelope.js'
import { sql } from 'slonik'
import { insertOutbox } from '../sql/outbox.js'
import { handlerLatency } from './lib/service-log.js'

interface Job { url: string; token: string; after: string; events: number; concurrency: number; proxy: string; agent: string; customer: string }

function arg(name: string, def: number): number {
  const i = process.argv.indexOf(`--${name}`)
  return i > 0 ? Number(process.argv[i + 1]) : def
}

/** An event whose id says `ms`, the `n`th of that millisecond (uuidv7() never goes back in time). */
function eventAt(ms: number, n: number, tenantId: string): EventEnvelope {
  const h = ms.toString(16).padStart(12, '0')
  return buildEnvelope(`${h.slice(0, 8)}-${h.slice(8)}-7000-8000-${n.toString(16).padStart(12, '0')}`, 'call.ended', ms, {
    sessionId: '01900000-0000-7000-8000-0000000000aa', tenantId, proxyNumber: '+12025550100',
    callId: '01900000-0000-7000-8000-0000000000bb', direction: 'A_TO_B', status: 'COMPLETED', durationSeconds: n % 600,
  })
}

async function worker(job: Job): Promise<void> {
  const { connectWs } = await import('../test/support/ws-client.js')
  const { CallbackDriver } = await import('../test/support/callback-driver.js')
  const driver = new CallbackDriver({ baseUrl: job.url, mode: 'none' })
  let stop = false
  let calls = 0
  const load = Promise.all(Array.from({ length: job.concurrency }, async () => {
    while (!stop) {
      const res = await driver.voice({ from: calls % 2 ? job.agent : job.customer, to: job.proxy, callSid: `resume-bench-${calls++}` })
      await res.arrayBuffer()
    }
  }))
  await new Promise(r => setTimeout(r, 500)) // the load is on before the resume starts
  const t0 = performance.now()
  const c = await connectWs(`${job.url}/v1/stream?after=${job.after}&types=call.ended`, { headers: { authorization: `Bearer ${job.token}` }, keepMessages: false })
  let got = 0
  let first = -1
  await new Promise<void>(resolve => {
    c.onMessage = () => { if (first < 0) first = performance.now() - t0; if (++got >= job.events) resolve() }
  })
  const ms = performance.now() - t0
  stop = true
  await load
  c.socket.destroy()
  parentPort!.postMessage({ got, ms, firstMs: first, calls })
}

async function main(): Promise<void> {
  const events = arg('events', 100_000)
  const concurrency = arg('concurrency', 4)
  const dir = mkdtempSync(join(tmpdir(), 'maskline-resume-bench-'))
  const logFile = join(dir, 'service.log')
  const config = loadConfig({ ...process.env, PORT: '0', DATA_DIR: dir, CPAAS_SIGNATURE: 'none', LOG_LEVEL: 'info', METRICS_PORT: 'off', NUMBER_POOL: 'US:+12025550100-+12025550199' })
  const svc = await startService({ config, logDestination: createWriteStream(logFile) })
  try {
    const post = async (path: string, body: unknown, token?: string) => {
      const r = await fetch(svc.url + path, { method: 'POST', headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) }, body: JSON.stringify(body) })
      return r.json() as Promise<Record<string, string>>
    }
    const acct = await post('/v1/auth/signup', { companyName: 'Resume bench', email: `resume-${Date.now()}@bench.test`, password: 'correct horse battery' })
    const token = (await post('/v1/auth/token', { apiKey: acct.apiKey, apiSecret: acct.apiSecret })).accessToken!
    const agent = '+14155550101', customer = '+14155550102'
    const session = await post('/v1/sessions', { agentPhone: agent, customerPhone: customer }, token)
    const base = Date.now() - 3_600_000
    const backlog = Array.from({ length: events }, (_, i) => eventAt(base + Math.floor(i / 16), i, acct.tenantId!))
    for (let i = 0; i < events; i += 5_000) await insertOutbox(svc.db.pool, backlog.slice(i, i + 5_000))
    const after = eventAt(base - 1, 0, acct.tenantId!)
    await insertOutbox(svc.db.pool, [after])
    // A bulk insert the planner has no statistics of yet would get a bitmap scan and a sort of the
    // whole rest of the backlog per page; a production outbox is analyzed (autovacuum).
    await svc.db.pool.query(sql.unsafe`ANALYZE outbox`)

    const loop = monitorEventLoopDelay({ resolution: 1 })
    const job: Job = { url: svc.url, token, after: after.id, events, concurrency, proxy: session.proxyNumber!, agent, customer }
    const from = Date.now()
    const w = new Worker(`import('tsx/esm/api').then(m => { m.register(); return import(${JSON.stringify(import.meta.url)}) })`, { eval: true, workerData: job })
    await new Promise(r => setTimeout(r, 500))
    loop.enable()
    const res = await new Promise<{ got: number; ms: number; firstMs: number; calls: number }>((resolve, reject) => { w.once('message', resolve); w.once('error', reject) })
    loop.disable()
    await w.terminate()
    await new Promise(r => setTimeout(r, 300)) // the log destination flushes behind the answers
    const inside = handlerLatency(logFile, '/v1/webhooks/cpaas/voice', from, Date.now())
    const backend = process.env.DATABASE_URL ? 'postgres' : 'pglite'
    console.log(`# ${events.toLocaleString('en')} events resumed in ${(res.ms / 1000).toFixed(2)} s (${backend}), first frame after ${res.firstMs.toFixed(0)} ms, ${res.calls} voice callbacks (${concurrency} at a time) meanwhile`)
    console.log(`bench: stream.resume.rate ${Math.round(res.got / (res.ms / 1000))} events/s`)
    if (inside) {
      console.log(`bench: stream.resume.callback.in_process.p50 ${inside.us.p50} us`)
      console.log(`bench: stream.resume.callback.in_process.p99 ${inside.us.p99} us`)
      console.log(`# target: in-process callback p99 < 1 ms during the replay: ${inside.us.p99 < 1000 ? 'met' : 'MISSED'} (${inside.count} callbacks)`)
    }
    console.log(`bench: stream.resume.event_loop_delay.p99 ${Math.round(loop.percentile(99) / 1000)} us`)
  } finally {
    await svc.close()
    rmSync(dir, { recursive: true, force: true })
  }
}

if (isMainThread) await main()
else await worker(workerData as Job)
