// Question: what does the gateway framework (gateway/http) add per request over a raw uWS
// handler? Side by side in one run (style 8): a raw handler, a trivial framework route, the same
// route behind tenant auth + the rate limiter, and a callback-shaped raw-body XML route. Each
// server runs in its own child process; wrk (or autocannon) loads it from this one. Then the
// same handlers in process with stand-in uWS objects (CPU time per request, free of socket and
// machine noise), and micro costs of the pipeline's parts.
//
//   node --import tsx bench/http-overhead.bench.ts            (BENCH_SECONDS=5 BENCH_CONNECTIONS=32)
//
// Output: `bench: <name> <value> <unit>` lines.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import uWS from 'uWebSockets.js'
import { Type } from '@sinclair/typebox'
import { pino } from 'pino'
import type { DatabasePool } from 'slonik'
import { createLogger } from '../api/log.js'
import { route, type RouteDef } from '../api/route.js'
import type { Services } from '../api/services.js'
import { createAuthenticator } from '../api/auth/authenticate.js'
import { issueToken, keyId, verifyToken } from '../api/auth/tokens.js'
import { createMemoryRateLimiter } from '../api/rate-limit/memory.js'
import { composeRateLimiter } from '../api/rate-limit/limiter.js'
import { TenantView } from '../api/schemas/common.js'
import { createHttpApp } from '../gateway/http/app.js'
import { compilePicker } from '../gateway/http/serialize.js'
import { checker } from '../gateway/http/compile.js'
import { activeTenants } from '../test/support/auth-directory.js'
import { unwired } from '../test/support/unwired.js'
import { TIER_LIMITS } from '../engine/types.js'

const TENANT = '01890a5d-ac96-774b-bcce-b302099a8057'
const SECRET = new TextEncoder().encode('bench-secret-bench-secret-bench-secret!!')
/** ENTERPRISE's requests per minute, over 10 ms: ~200,000 req/s on one key before a 429. */
const ADMIT = { limit: TIER_LIMITS.ENTERPRISE.requestsPerMinute, windowMs: 10 }
const KINDS = ['raw-uws', 'framework-none', 'framework-tenant', 'framework-callback'] as const
type Kind = (typeof KINDS)[number]
const FORM = 'CallSid=CA0123456789abcdef&From=%2B12025550101&To=%2B12025550199&AccountSid=AC1&CallStatus=ringing&Direction=inbound'

function fakeServices(): Services {
  // Nothing reaches the database: every tenant is an ACTIVE one held in memory, as the directory holds it.
  const db = {} as unknown as DatabasePool
  const inner = createMemoryRateLimiter({ now: Date.now })
  const log = createLogger({ destination: pino.destination({ dest: '/dev/null', sync: false }) })
  return {
    config: { publicBaseUrl: 'http://127.0.0.1', nodeId: 'bench', cooldownSeconds: 900, retentionDays: 90, webhookAllowInsecure: false },
    log,
    db,
    jwtSecret: SECRET,
    phoneKey: randomBytes(32),
    hashParty: () => '',
    now: Date.now,
    authenticator: createAuthenticator({ jwtSecret: SECRET, now: Date.now, directory: activeTenants('ENTERPRISE') }),
    // The real limiter at the largest tier's limit, over a window no run fills: the admitted path
    // is what is measured. (Not a limit of 1e9: the limiter keeps a ring of `limit` slots per key,
    // and a billion slots ran the process out of memory.)
    rateLimiter: composeRateLimiter({ shared: { hit: (key: string) => inner.hit(key, ADMIT.limit, ADMIT.windowMs) }, now: Date.now, log }),
    ...unwired(),
  }
}

const Ok = Type.Object({ ok: Type.Boolean() })
const benchRoutes: RouteDef[] = [
  route({ method: 'GET', path: '/v1/ping', auth: 'none', response: { 200: Ok }, problems: [], handler: () => ({ status: 200, body: { ok: true } }) }),
  route({ method: 'GET', path: '/v1/tenant-ping', auth: 'tenant', response: { 200: Ok }, problems: [], handler: () => ({ status: 200, body: { ok: true } }) }),
  route({
    method: 'POST', path: '/v1/webhooks/cpaas/voice', auth: 'none', rawBody: true, contentType: 'application/xml',
    response: { 200: Type.String() }, problems: [],
    handler: req => ({ status: 200, body: `<?xml version="1.0" encoding="UTF-8"?><Response><Say>${req.rawBody!.length}</Say><Hangup/></Response>` }),
  }),
]

async function serve(kind: Kind): Promise<void> {
  let port: number
  if (kind === 'raw-uws') {
    port = await new Promise<number>((resolve, reject) => {
      uWS.App().get('/v1/ping', res => {
        res.cork(() => { res.writeHeader('content-type', 'application/json'); res.end('{"ok":true}') })
      }).listen('127.0.0.1', 0, s => (s ? resolve(uWS.us_socket_local_port(s)) : reject(new Error('listen'))))
    })
  } else {
    port = await createHttpApp({ services: fakeServices(), routes: benchRoutes }).listen('127.0.0.1', 0)
  }
  const token = await issueToken(SECRET, { typ: 'tenant', sub: 'bench', tenantId: TENANT, tier: 'ENTERPRISE', scopes: ['api'] }, Date.now())
  process.stdout.write(`listening ${port} ${token}\n`)
}

interface Load { rps: number; p50: number; p99: number; errors: number }

function wrkPath(): string | null {
  const r = spawnSync('sh', ['-c', 'command -v wrk'], { encoding: 'utf8' })
  return r.status === 0 ? r.stdout.trim() : null
}

function usOf(v: string): number {
  const m = /^([\d.]+)(us|ms|s)$/.exec(v.trim())
  if (!m) return NaN
  return Number(m[1]) * (m[2] === 'us' ? 1 : m[2] === 'ms' ? 1_000 : 1_000_000)
}

async function load(url: string, o: { seconds: number; connections: number; token?: string; post?: string }): Promise<Load> {
  const wrk = wrkPath()
  if (wrk) {
    const script = join(tmpdir(), `maskline-bench-${process.pid}.lua`)
    const lines = []
    if (o.post) lines.push('wrk.method = "POST"', `wrk.body = "${o.post}"`, 'wrk.headers["Content-Type"] = "application/x-www-form-urlencoded"')
    if (o.token) lines.push(`wrk.headers["Authorization"] = "Bearer ${o.token}"`)
    writeFileSync(script, lines.join('\n') + '\n')
    const r = spawnSync(wrk, ['-t1', `-c${o.connections}`, `-d${o.seconds}s`, '--latency', '-s', script, url], { encoding: 'utf8' })
    const out = r.stdout
    const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1])
    const p50 = usOf(/^\s+50%\s+(\S+)/m.exec(out)?.[1] ?? '')
    const p99 = usOf(/^\s+99%\s+(\S+)/m.exec(out)?.[1] ?? '')
    const errors = Number(/Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1] ?? 0)
    return { rps, p50, p99, errors }
  }
  // autocannon ships no types; only its documented run() result fields are read.
  const { default: autocannon } = await import('autocannon' as string) as { default: (o: object) => Promise<any> }
  const res = await autocannon({
    url, connections: o.connections, duration: o.seconds, method: o.post ? 'POST' : 'GET', body: o.post,
    headers: { ...(o.token ? { authorization: `Bearer ${o.token}` } : {}), ...(o.post ? { 'content-type': 'application/x-www-form-urlencoded' } : {}) },
  })
  return { rps: res.requests.average, p50: res.latency.p50 * 1000, p99: res.latency.p99 * 1000, errors: res.non2xx }
}

function startServer(kind: Kind): Promise<{ child: ChildProcess; port: number; token: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), '--serve', kind], { stdio: ['ignore', 'pipe', 'inherit'] })
  return new Promise((resolve, reject) => {
    let buf = ''
    child.stdout!.on('data', d => {
      buf += d
      const m = /listening (\d+) (\S+)/.exec(buf)
      if (m) resolve({ child, port: Number(m[1]), token: m[2]! })
    })
    child.once('exit', code => reject(new Error(`${kind} server exited (${code})`)))
  })
}

// In process, no sockets: the same handlers driven with stand-in uWS request/response objects.
// Machines running the HTTP runs above are often busy; this isolates the framework's CPU time.
type Handler = (res: any, req: any) => void
function fakeApp(): { app: any; handlers: Map<string, Handler> } {
  const handlers = new Map<string, Handler>()
  const reg = (m: string) => (pattern: string, h: Handler) => { handlers.set(`${m} ${pattern}`, h); return app }
  const app: any = { get: reg('get'), post: reg('post'), patch: reg('patch'), put: reg('put'), del: reg('del'), any: reg('any') }
  return { app, handlers }
}

const ADDRESS = new TextEncoder().encode('10.0.0.7').buffer

function drive(h: Handler, o: { method: string; url: string; headers: Record<string, string>; body?: Buffer }): Promise<void> {
  return new Promise(resolve => {
    const res = {
      onAborted() { return res },
      onData(cb: (chunk: ArrayBuffer, last: boolean) => void) {
        const b = o.body ?? Buffer.alloc(0)
        cb(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength) as ArrayBuffer, true)
        return res
      },
      cork(cb: () => void) { cb(); return res },
      writeStatus() { return res },
      writeHeader() { return res },
      end() { resolve(); return res },
      endWithoutBody() { resolve(); return res },
      getRemoteAddressAsText: () => ADDRESS,
    }
    const req = {
      forEach(cb: (k: string, v: string) => void) { for (const k in o.headers) cb(k, o.headers[k]!) },
      getHeader: (k: string) => o.headers[k] ?? '',
      getParameter: () => '',
      getMethod: () => o.method,
      getUrl: () => o.url,
      getQuery: () => '',
    }
    h(res, req)
  })
}

async function pipeline(token: string): Promise<void> {
  const { app, handlers } = fakeApp()
  createHttpApp({ services: fakeServices(), routes: benchRoutes, app })
  const raw: Handler = res => { res.cork(() => { res.writeHeader('content-type', 'application/json'); res.end('{"ok":true}') }) }
  const common = { host: '127.0.0.1:8080', 'user-agent': 'bench', accept: '*/*' }
  const cases: [string, Handler, Parameters<typeof drive>[1]][] = [
    ['raw-uws', raw, { method: 'get', url: '/v1/ping', headers: common }],
    ['framework-none', handlers.get('get /v1/ping')!, { method: 'get', url: '/v1/ping', headers: common }],
    ['framework-tenant', handlers.get('get /v1/tenant-ping')!, { method: 'get', url: '/v1/tenant-ping', headers: { ...common, authorization: `Bearer ${token}` } }],
    ['framework-callback', handlers.get('post /v1/webhooks/cpaas/voice')!, { method: 'post', url: '/v1/webhooks/cpaas/voice', headers: { ...common, 'content-type': 'application/x-www-form-urlencoded' }, body: Buffer.from(FORM) }],
  ]
  const perReq = new Map<string, number>()
  for (const [name, h, o] of cases) {
    const n = 100_000
    for (let i = 0; i < n / 5; i++) await drive(h, o)
    const t0 = process.hrtime.bigint()
    for (let i = 0; i < n; i++) await drive(h, o)
    const us = Number(process.hrtime.bigint() - t0) / n / 1000
    perReq.set(name, us)
    console.log(`bench: inprocess-${name} ${us.toFixed(3)} µs/req`)
  }
  for (const [name] of cases.slice(1)) console.log(`bench: inprocess-${name}-overhead-vs-raw ${(perReq.get(name)! - perReq.get('raw-uws')!).toFixed(3)} µs/req`)
}

function micro(name: string, fn: () => unknown, iterations = 200_000): void {
  for (let i = 0; i < iterations / 10; i++) fn()
  const t0 = process.hrtime.bigint()
  for (let i = 0; i < iterations; i++) fn()
  const ns = Number(process.hrtime.bigint() - t0) / iterations
  console.log(`bench: ${name} ${(ns / 1000).toFixed(3)} µs/op`)
}

async function microAsync(name: string, fn: () => Promise<unknown>, iterations = 50_000): Promise<void> {
  for (let i = 0; i < iterations / 10; i++) await fn()
  const t0 = process.hrtime.bigint()
  for (let i = 0; i < iterations; i++) await fn()
  const ns = Number(process.hrtime.bigint() - t0) / iterations
  console.log(`bench: ${name} ${(ns / 1000).toFixed(3)} µs/op`)
}

async function main(): Promise<void> {
  const seconds = Number(process.env.BENCH_SECONDS ?? 5)
  const connections = Number(process.env.BENCH_CONNECTIONS ?? 32)
  console.log(`# http-overhead: node ${process.version}, ${wrkPath() ? 'wrk' : 'autocannon'}, ${connections} connections, ${seconds} s per run`)
  const results = new Map<Kind, Load>()
  for (const kind of KINDS) {
    const { child, port, token } = await startServer(kind)
    try {
      const url = `http://127.0.0.1:${port}${kind === 'framework-tenant' ? '/v1/tenant-ping' : kind === 'framework-callback' ? '/v1/webhooks/cpaas/voice' : '/v1/ping'}`
      const opts = { seconds, connections, token: kind === 'framework-tenant' ? token : undefined, post: kind === 'framework-callback' ? FORM : undefined }
      await load(url, { ...opts, seconds: 1 }) // warm-up: JIT, caches
      const r = await load(url, opts)
      results.set(kind, r)
      console.log(`bench: ${kind}-throughput ${r.rps.toFixed(0)} req/s`)
      console.log(`bench: ${kind}-latency-p50 ${r.p50.toFixed(0)} µs`)
      console.log(`bench: ${kind}-latency-p99 ${r.p99.toFixed(0)} µs`)
      if (r.errors) console.log(`bench: ${kind}-non2xx ${r.errors} responses`)
    } finally {
      if (child.pid) process.kill(child.pid, 'SIGKILL')
    }
  }
  // The server is one thread at saturation: 1/throughput is its CPU time per request.
  const raw = results.get('raw-uws')!.rps
  for (const kind of KINDS.slice(1)) {
    console.log(`bench: ${kind}-overhead-vs-raw ${((1 / results.get(kind)!.rps - 1 / raw) * 1e6).toFixed(2)} µs/req`)
  }

  const kid = keyId(SECRET)
  await pipeline(await issueToken(SECRET, { typ: 'tenant', sub: 'bench', tenantId: TENANT, tier: 'ENTERPRISE', scopes: ['api'] }, Date.now()))
  const token = await issueToken(SECRET, { typ: 'tenant', sub: 'bench', tenantId: TENANT, tier: 'GROWTH', scopes: ['api'] }, Date.now())
  const auth = createAuthenticator({ jwtSecret: SECRET, now: Date.now, directory: activeTenants('GROWTH') })
  const header = `Bearer ${token}`
  await microAsync('jwt-verify-jose', () => verifyToken(SECRET, kid, token, Date.now()), 20_000)
  await microAsync('auth-cached-token', async () => auth.authenticate(header, 'tenant'))
  const limiter = createMemoryRateLimiter({ now: Date.now })
  let k = 0
  micro('ratelimit-memory-hit', () => limiter.hit(`tenant:${k++ % 1000}`, ADMIT.limit, ADMIT.windowMs))
  const pick = compilePicker(TenantView, checker)
  const row = { id: TENANT, name: 'Acme', tier: 'GROWTH', status: 'ACTIVE', webhookUrl: null, defaultGracePeriod: 15, expiredCallBehavior: 'DEAD_LINE', supportPhone: null,
    recordingEnabled: false, recordingConsentMode: 'DEFAULT', recordingConsentAudioUrl: null, pushConfig: {}, createdAt: '2026-01-01T00:00:00.000Z', updatedAt: '2026-01-01T00:00:00.000Z', salt: Buffer.alloc(32) }
  micro('serialize-tenant-view', () => JSON.stringify(pick(row)))
  const log = createLogger({ destination: pino.destination({ dest: '/dev/null', sync: false }) })
  micro('log-request-line', () => log.info({ method: 'GET', route: '/v1/sessions/:id', status: 200, us: 123, tenantId: TENANT }, 'request'))
}

if (process.argv[2] === '--serve') await serve(process.argv[3] as Kind)
else await main()
