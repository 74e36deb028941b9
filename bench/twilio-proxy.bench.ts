// The Twilio Proxy façade (docs/twilio-proxy.md) against the native API, on one service and one
// database, under the same load:
// - creates: a Session with its two Participants in one request, in the `twilio` SDK's wire format
//   (POST /proxy/v1/Services/{KS}/Sessions, form-encoded, HTTP Basic, each participant a JSON
//   field), against POST /v1/sessions. Target: façade creates/s ≥ 0.8 × native creates/s.
// - routing: voice fetches on façade sessions (a participant calling its own proxy number) against
//   native sessions. Target: the same in-process handler p99 (within 10 %, or 25 µs) and the same
//   throughput (≥ 0.9 ×). Routing is one memory lookup either way (docs/dual-proxy.md).
// Tenants are ENTERPRISE and requests are spread over them so the per-tenant rate limit is not what
// is measured. The load runs in a worker thread, off the service's event loop.
//   node --import tsx bench/twilio-proxy.bench.ts [--tenants 16] [--creates 3000] [--calls 20000] [--concurrency 16]
// Embedded PGlite unless DATABASE_URL is set (then JWT_SECRET and PHONE_KEY too, as for any service on Postgres).
import { createWriteStream, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads'
import { sql } from 'slonik'
import { loadConfig } from '../gateway/config.js'
import { startService } from '../gateway/service.js'
import { handlerLatency } from './lib/service-log.js'

interface Tenant { token: string; basic: string; service: string }
interface Job { url: string; tenants: Tenant[]; creates: number; calls: number; concurrency: number }
interface Phase { name: string; from: number; to: number; ok: number; failed: number; statuses: Record<string, number> }
interface Route { from: string; to: string }

function arg(name: string, def: number): number {
  const i = process.argv.indexOf(`--${name}`)
  return i > 0 ? Number(process.argv[i + 1]) : def
}

/** A distinct E.164 number for party `i` of kind `k` (0..3). */
const party = (k: number, i: number) => `+1${['415', '628', '510', '650'][k]}${String(2_000_000 + i).padStart(7, '0')}`

async function worker(job: Job): Promise<void> {
  const { CallbackDriver } = await import('../test/support/callback-driver.js')
  const T = job.tenants.length

  async function phase(name: string, n: number, one: (i: number) => Promise<number>): Promise<Phase> {
    const statuses: Record<string, number> = {}
    let next = 0, ok = 0, failed = 0
    const from = Date.now()
    await Promise.all(Array.from({ length: job.concurrency }, async () => {
      while (next < n) {
        const i = next++
        const status = await one(i).catch(() => 0)
        if (status >= 200 && status < 300) ok++
        else { failed++; statuses[status] = (statuses[status] ?? 0) + 1 }
      }
    }))
    return { name, from, to: Date.now(), ok, failed, statuses }
  }

  const native: Route[] = []
  const facade: string[] = [] // session URLs, participants read after the timed phase
  const nativeCreates = await phase('native.create', job.creates, async i => {
    const t = job.tenants[i % T]!
    const r = await fetch(`${job.url}/v1/sessions`, {
      method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${t.token}` },
      body: JSON.stringify({ agentPhone: party(0, i), customerPhone: party(1, i) }),
    })
    const body = await r.json() as { proxyNumber?: string }
    if (r.status === 201) native.push({ from: party(0, i), to: body.proxyNumber! })
    return r.status
  })
  const facadeCreates = await phase('facade.create', job.creates, async i => {
    const t = job.tenants[i % T]!
    const form = new URLSearchParams()
    form.append('UniqueName', `bench-${i}`)
    form.append('Participants', JSON.stringify({ Identifier: party(2, i) }))
    form.append('Participants', JSON.stringify({ Identifier: party(3, i) }))
    const r = await fetch(`${job.url}/proxy/v1/Services/${t.service}/Sessions`, {
      method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: t.basic, accept: 'application/json' }, body: form,
    })
    const body = await r.json() as { url?: string }
    if (r.status === 201) facade.push(`${body.url!}/Participants|${i % T}`)
    return r.status
  })

  // Who calls which number on the façade sessions: the first participant, its own proxy.
  const facadeRoutes: Route[] = []
  for (const entry of facade.slice(0, 2_000)) {
    const [url, k] = entry.split('|') as [string, string]
    const r = await fetch(url, { headers: { authorization: job.tenants[Number(k)]!.basic, accept: 'application/json' } })
    const p = (await r.json() as { participants: Array<{ identifier: string; proxy_identifier: string }> }).participants[0]
    if (p) facadeRoutes.push({ from: p.identifier, to: p.proxy_identifier })
  }
  const driver = new CallbackDriver({ baseUrl: job.url, mode: 'none' })
  const call = (routes: Route[], tag: string) => async (i: number) => {
    const route = routes[i % routes.length]!
    const r = await driver.voice({ from: route.from, to: route.to, callSid: `${tag}-${i}` })
    const text = await r.text()
    return r.status === 200 && text.includes('<Dial') ? 200 : 0
  }
  const nativeRoutes = native.slice(0, 2_000)
  const nativeCalls = await phase('native.route', job.calls, call(nativeRoutes, 'native'))
  const facadeCalls = await phase('facade.route', job.calls, call(facadeRoutes, 'facade'))
  parentPort!.postMessage({ phases: [nativeCreates, facadeCreates, nativeCalls, facadeCalls], facadeRoutes: facadeRoutes.length, nativeRoutes: nativeRoutes.length })
}

async function main(): Promise<void> {
  const tenantCount = arg('tenants', 16)
  const creates = arg('creates', 3_000)
  const calls = arg('calls', 20_000)
  const concurrency = arg('concurrency', 16)
  const poolSize = 3_000
  const perService = 50
  const dir = mkdtempSync(join(tmpdir(), 'maskline-facade-bench-'))
  const logFile = join(dir, 'service.log')
  const config = loadConfig({ ...process.env, PORT: '0', DATA_DIR: dir, CPAAS_SIGNATURE: 'none', TRUSTED_PROXY: '127.0.0.1', LOG_LEVEL: 'info', METRICS_PORT: 'off', NUMBER_POOL: `US:+12025550000-+1202555${String(poolSize - 1).padStart(4, '0')}` })
  const svc = await startService({ config, logDestination: createWriteStream(logFile) })
  try {
    // Each tenant's setup from its own address (TRUSTED_PROXY): 16 dashboard logins from one address would pass its per-minute limit.
    let from = '198.51.100.1'
    const call = async (method: string, path: string, body: unknown, auth?: string, form?: URLSearchParams) => {
      const r = await fetch(svc.url + path, {
        method,
        headers: { ...(form ? { 'content-type': 'application/x-www-form-urlencoded' } : { 'content-type': 'application/json' }), ...(auth ? { authorization: auth } : {}), 'x-forwarded-for': from },
        body: form ?? (body === undefined ? undefined : JSON.stringify(body)),
      })
      const text = await r.text()
      if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${text.slice(0, 300)}`)
      return JSON.parse(text) as Record<string, string>
    }
    const tenants: Tenant[] = []
    for (let k = 0; k < tenantCount; k++) {
      from = `198.51.100.${k + 1}`
      const email = `facade-${k}-${Date.now()}@bench.test`, password = 'correct horse battery'
      const acct = await call('POST', '/v1/auth/signup', { companyName: `Facade bench ${k}`, email, password })
      await svc.db.pool.query(sql.unsafe`UPDATE tenants SET tier = 'ENTERPRISE' WHERE id = ${acct.tenantId!}`)
      svc.services.authenticator.changed(acct.tenantId!)
      const token = (await call('POST', '/v1/auth/token', { apiKey: acct.apiKey, apiSecret: acct.apiSecret })).accessToken!
      const owner = (await call('POST', '/v1/auth/dashboard/login', { email, password })).accessToken!
      const cred = await call('POST', '/v1/twilio-proxy/credentials', undefined, `Bearer ${owner}`)
      const basic = `Basic ${Buffer.from(`${cred.accountSid}:${cred.authToken}`).toString('base64')}`
      const service = (await call('POST', '/proxy/v1/Services', undefined, basic, new URLSearchParams({ UniqueName: `bench-${k}` }))).sid!
      for (let n = 0; n < perService; n++) {
        const number = `+1202555${String(k * perService + n).padStart(4, '0')}`
        await call('POST', `/proxy/v1/Services/${service}/PhoneNumbers`, undefined, basic, new URLSearchParams({ PhoneNumber: number }))
      }
      tenants.push({ token, basic, service })
    }
    const backend = process.env.DATABASE_URL ? 'postgres' : 'pglite'
    console.log(`# ${tenantCount} ENTERPRISE tenants (${backend}), each a Service of ${perService} numbers; native sessions on the other ${poolSize - tenantCount * perService} numbers; ${concurrency} requests at a time`)
    const job: Job = { url: svc.url, tenants, creates, calls, concurrency }
    const w = new Worker(`import('tsx/esm/api').then(m => { m.register(); return import(${JSON.stringify(import.meta.url)}) })`, { eval: true, workerData: job })
    const res = await new Promise<{ phases: Phase[]; facadeRoutes: number; nativeRoutes: number }>((resolve, reject) => { w.once('message', resolve); w.once('error', reject) })
    await w.terminate()
    await new Promise(r => setTimeout(r, 300)) // the log destination flushes behind the answers
    const rate = (p: Phase) => p.ok / ((p.to - p.from) / 1000)
    const [nc, fc, nr, fr] = res.phases as [Phase, Phase, Phase, Phase]
    for (const p of res.phases) {
      console.log(`bench: ${p.name}.rps ${Math.round(rate(p))} req/s`)
      if (p.failed > 0) console.log(`# ${p.name}: ${p.failed} of ${p.ok + p.failed} failed (${JSON.stringify(p.statuses)})`)
    }
    const createRatio = rate(fc) / rate(nc)
    console.log(`bench: facade.create.vs_native ${createRatio.toFixed(3)} ratio`)
    console.log(`# target: creates (session + 2 participants) ≥ 0.8 × native creates: ${createRatio >= 0.8 ? 'met' : 'NOT met'} (${createRatio.toFixed(2)})`)
    const inside = (p: Phase) => handlerLatency(logFile, '/v1/webhooks/cpaas/voice', p.from, p.to)
    const ni = inside(nr), fi = inside(fr)
    if (ni && fi) {
      for (const [name, x] of [['native.route', ni], ['facade.route', fi]] as const) {
        console.log(`bench: ${name}.in_process.p50 ${x.us.p50} us`)
        console.log(`bench: ${name}.in_process.p99 ${x.us.p99} us`)
      }
      const p99Ok = fi.us.p99 <= Math.max(ni.us.p99 * 1.1, ni.us.p99 + 25)
      console.log(`bench: facade.route.p99_vs_native ${(fi.us.p99 / ni.us.p99).toFixed(3)} ratio`)
      console.log(`# target: routed voice p99 in the process equal to native (within 10 % or 25 µs): ${p99Ok ? 'met' : 'NOT met'} (${fi.us.p99} vs ${ni.us.p99} µs over ${fi.count} and ${ni.count} callbacks on ${res.facadeRoutes} façade and ${res.nativeRoutes} native sessions)`)
    }
    const routeRatio = rate(fr) / rate(nr)
    console.log(`bench: facade.route.vs_native ${routeRatio.toFixed(3)} ratio`)
    console.log(`# target: routed calls/s ≥ 0.9 × native: ${routeRatio >= 0.9 ? 'met' : 'NOT met'} (${routeRatio.toFixed(2)})`)
  } finally {
    await svc.close()
    rmSync(dir, { recursive: true, force: true })
  }
}

if (isMainThread) await main()
else await worker(workerData as Job)
