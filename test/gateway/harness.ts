// The gateway on port 0 with a real database (style 7: test/support/db.ts, Postgres or PGlite),
// a settable clock, and every log line and response body captured for the privacy checks.
// `t.teardown` closes the server.
import { randomBytes } from 'node:crypto'
import tap, { type Test } from 'tap'
import { sql, type DatabasePool } from 'slonik'
import { createLogger } from '../../api/log.js'
import type { RouteDef } from '../../api/route.js'
import type { Services } from '../../api/services.js'
import { composeRateLimiter } from '../../api/rate-limit/limiter.js'
import { authRoutes } from '../../api/routes/auth.js'
import { configRoutes } from '../../api/routes/config.js'
import { deviceRoutes } from '../../api/routes/devices.js'
import { healthRoutes, type HealthChecks } from '../../api/routes/health.js'
import { numberRoutes } from '../../api/routes/numbers.js'
import { openapiRoute } from '../../api/routes/openapi.js'
import { createHttpApp } from '../../gateway/http/app.js'
import { TenantDirectory } from '../../api/app/tenant-directory.js'
import { createAuthenticator } from '../../api/auth/authenticate.js'
import { createPartyHasher } from '../../sql/crypto.js'
import { testDatabase } from '../support/db.js'
import { retryBusy } from '../support/retry-busy.js'
import { unwired } from '../support/unwired.js'

export const BASE_URL = 'https://maskline.test'

export class TestClock {
  t: number
  constructor(start = Date.now()) { this.t = start }
  now = (): number => this.t
  advance(ms: number): void { this.t += ms }
}

export interface Res {
  status: number
  headers: Headers
  text: string
  body: any
}

export interface RequestOptions {
  body?: unknown
  raw?: string | Buffer
  token?: string
  headers?: Record<string, string>
}

export interface Account {
  tenantId: string
  apiKey: string
  apiSecret: string
  accessToken: string
  user: { id: string; email: string; role: string; tenantId: string }
  email: string
  password: string
  companyName: string
}

/**
 * The routes this module owns, plus GET /v1/openapi.json over them. `checks`: the probes of GET
 * /v1/health; by default a ping of the file's database, redis 'disabled' (the service's own probes
 * are tested through the service, test/api/health.test.ts).
 */
export function ownRoutes(extra: RouteDef[] = [], checks: HealthChecks = pingDatabase): RouteDef[] {
  const routes: RouteDef[] = [...authRoutes, ...configRoutes, ...deviceRoutes, ...numberRoutes, ...healthRoutes(checks), ...extra]
  routes.push(openapiRoute(routes))
  return routes
}

export interface StartOptions {
  routes?: RouteDef[]
  extraRoutes?: RouteDef[]
  services?: Partial<Services>
  clock?: TestClock
  /** false: no database (framework tests); queries then fail loudly. */
  database?: boolean
}

// One database per test file (process), shared by its subtests: each test works in its own
// tenants, so they do not see each other. Creating one per subtest costs seconds on PGlite.
let shared: Promise<DatabasePool> | null = null
function sharedDatabase(): Promise<DatabasePool> {
  shared ??= testDatabase(tap).then(db => db.pool)
  return shared
}

async function pingDatabase(): Promise<{ postgres: string; redis: string }> {
  const db = await sharedDatabase()
  return { postgres: await db.oneFirst(sql.unsafe`SELECT 1`).then(() => 'ok', () => 'down'), redis: 'disabled' }
}

const noDatabase = new Proxy({}, { get() { throw new Error('this test runs without a database') } }) as DatabasePool

export async function startApi(t: Test, opts: StartOptions = {}) {
  const db = opts.database === false ? noDatabase : await sharedDatabase()
  const clock = opts.clock ?? new TestClock()
  const logs: string[] = []
  const bodies: string[] = []
  const log = createLogger({ level: 'debug', destination: { write: (s: string) => { logs.push(s) } } })
  const phoneKey = randomBytes(32)
  const jwtSecret = randomBytes(32)
  const services: Services = {
    config: { publicBaseUrl: BASE_URL, nodeId: 'test', cooldownSeconds: 900, retentionDays: 90, webhookAllowInsecure: false },
    log,
    db,
    jwtSecret,
    phoneKey,
    hashParty: createPartyHasher(phoneKey),
    now: clock.now,
    // The tenant directory as a node that has just booted: each tenant loaded on first use, then kept current.
    authenticator: createAuthenticator({ jwtSecret, phoneKey, now: clock.now, directory: new TenantDirectory(db) }),
    ...unwired(),
    ...opts.services,
    // guarded as the composition root guards it: a test's limiter stands for the shared (Redis) one
    rateLimiter: composeRateLimiter({ shared: opts.services?.rateLimiter, now: clock.now, log }),
  }
  const routes = opts.routes ?? ownRoutes(opts.extraRoutes)
  const http = createHttpApp({ services, routes, checkResponses: true })
  const port = await http.listen('127.0.0.1', 0)
  const url = `http://127.0.0.1:${port}`
  t.teardown(() => http.close(1_000)) // the shared database closes when the file's tests end

  async function request(method: string, path: string, o: RequestOptions = {}): Promise<Res> {
    const headers: Record<string, string> = { ...o.headers }
    let body: string | Buffer | undefined
    if (o.raw !== undefined) body = o.raw
    else if (o.body !== undefined) {
      body = JSON.stringify(o.body)
      headers['content-type'] ??= 'application/json'
    }
    if (o.token) headers.authorization = `Bearer ${o.token}`
    const r = await fetch(url + path, { method, headers, body })
    const text = await r.text()
    bodies.push(text)
    let parsed: unknown = text
    if (/json/.test(r.headers.get('content-type') ?? '')) parsed = JSON.parse(text)
    return { status: r.status, headers: r.headers, text, body: parsed }
  }

  let n = 0
  async function signup(over: Partial<{ companyName: string; email: string; password: string }> = {}): Promise<Account> {
    const tag = `${process.pid}-${Date.now()}-${++n}-${randomBytes(3).toString('hex')}`
    const companyName = over.companyName ?? `Acme ${tag}`
    const email = over.email ?? `owner-${tag}@example.com`
    const password = over.password ?? `pw-${randomBytes(8).toString('hex')}`
    const r = await retryBusy(() => request('POST', '/v1/auth/signup', { body: { companyName, email, password } }))
    if (r.status !== 201) throw new Error(`signup failed: ${r.status} ${r.text}`)
    return { ...r.body, email, password, companyName }
  }

  return {
    url,
    services,
    clock,
    db,
    http,
    request,
    get: (path: string, o?: RequestOptions) => request('GET', path, o),
    post: (path: string, o?: RequestOptions) => request('POST', path, o),
    patch: (path: string, o?: RequestOptions) => request('PATCH', path, o),
    del: (path: string, o?: RequestOptions) => request('DELETE', path, o),
    signup,
    async login(email: string, password: string, headers?: Record<string, string>): Promise<string> {
      const r = await request('POST', '/v1/auth/dashboard/login', { body: { email, password }, headers })
      if (r.status !== 200) throw new Error(`login failed: ${r.status}`)
      return r.body.accessToken as string
    },
    /** Every log line so far, parsed. */
    logLines: (): Record<string, any>[] => logs.map(l => JSON.parse(l)),
    rawLogs: logs,
    /** Every response body so far, as text. */
    bodies,
  }
}

export type Api = Awaited<ReturnType<typeof startApi>>

/** Contract 7 problem document, whole (instance checked by shape). */
export function problem(slug: string, status: number, extra: Record<string, unknown> = {}) {
  return { type: `${BASE_URL}/errors/${slug}`, status, ...extra }
}

export const INSTANCE_RE = /^urn:maskline:err:[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/
