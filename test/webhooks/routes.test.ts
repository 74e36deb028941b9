// Contract 4.9 through the real gateway (uWS on port 0, real database on both backends): register,
// read, test event (really delivered), delivery log.
import t, { type Test } from 'tap'
import { randomBytes } from 'node:crypto'
import { sql, type DatabasePool } from 'slonik'
import { testDatabase } from '../support/db.js'
import { createAuthenticator } from '../../api/auth/authenticate.js'
import { TenantDirectory } from '../../api/app/tenant-directory.js'
import { startWebhookReceiver } from '../support/webhook-receiver.js'
import { uuidv7 } from '../../sql/vocabulary/ids.js'
import { createLogger } from '../../api/log.js'
import { issueToken } from '../../api/auth/tokens.js'
import type { Services } from '../../api/services.js'
import { composeRateLimiter } from '../../api/rate-limit/limiter.js'
import { webhookRoutes } from '../../api/routes/webhooks.js'
import { createHttpApp } from '../../gateway/http/app.js'
import { createDispatcher } from '../../gateway/webhooks/dispatcher.js'
import { verifyDelivery } from '../support/standard-webhooks.js'
import { createPartyHasher } from '../../sql/crypto.js'
import { createSecretCipher, insertDelivery } from '../../sql/webhooks.js'
import { unwired } from '../support/unwired.js'

const BASE = 'https://maskline.test'

// One database for the file (opening one costs seconds on PGlite); tests use their own tenants.
let shared: ReturnType<typeof testDatabase> | null = null
const root = t

async function start(t: Test) {
  const db = await (shared ??= testDatabase(root))
  const phoneKey = randomBytes(32)
  const jwtSecret = randomBytes(32)
  const logs: string[] = []
  const log = createLogger({ level: 'debug', destination: { write: (s: string) => { logs.push(s) } } })
  const dispatcher = createDispatcher({
    pool: db.pool, log, now: Date.now, allowInsecure: true, secrets: createSecretCipher(phoneKey), pollIntervalMs: 60_000,
  })
  const services: Services = {
    config: { publicBaseUrl: BASE, nodeId: 'test', cooldownSeconds: 900, retentionDays: 90, webhookAllowInsecure: false },
    log, db: db.pool, jwtSecret, phoneKey, hashParty: createPartyHasher(phoneKey), now: Date.now,
    authenticator: createAuthenticator({ jwtSecret, phoneKey, now: Date.now, directory: new TenantDirectory(db.pool) }),
    rateLimiter: composeRateLimiter({ now: Date.now, log }),
    ...unwired(),
    webhookDispatcher: dispatcher,
  }
  dispatcher.start()
  const http = createHttpApp({ services, routes: webhookRoutes, checkResponses: true })
  const port = await http.listen('127.0.0.1', 0)
  t.teardown(async () => {
    await dispatcher.stop()
    await http.close(500)
  })
  const tenant = async () => {
    const id = uuidv7()
    await db.pool.query(sql.unsafe`INSERT INTO tenants (id, name, salt) VALUES (${id}, ${`t-${id}`}, ${sql.binary(randomBytes(32))})`)
    const token = await issueToken(jwtSecret, { typ: 'tenant', sub: 'key', tenantId: id, tier: 'STARTER', scopes: ['api'] }, Date.now())
    return { id, token }
  }
  const request = async (method: string, path: string, o: { token?: string; body?: unknown } = {}) => {
    const headers: Record<string, string> = {}
    if (o.token) headers.authorization = `Bearer ${o.token}`
    if (o.body !== undefined) headers['content-type'] = 'application/json'
    const r = await fetch(`http://127.0.0.1:${port}${path}`, { method, headers, body: o.body === undefined ? undefined : JSON.stringify(o.body) })
    const text = await r.text()
    return { status: r.status, headers: r.headers, body: text ? JSON.parse(text) : null }
  }
  return { db, services, dispatcher, jwtSecret, tenant, request, logs }
}

/**
 * `n` delivery rows of one tenant, ten to a millisecond from `at`; the milliseconds are dealt out
 * of insertion order (i * 37 mod n), so neither insertion order nor id order is time order.
 * Returns their ids newest first: requested_at DESC, then id DESC within a millisecond (uuid
 * order is the order of the lowercase hex text).
 */
async function insertDeliveries(pool: DatabasePool, tenantId: string, n: number, at: number): Promise<string[]> {
  const rows: Array<{ id: string; ms: number }> = []
  for (let i = 0; i < n; i++) {
    const id = uuidv7()
    const ms = at + Math.floor(((i * 37) % n) / 10)
    rows.push({ id, ms })
    await insertDelivery(pool, { id, tenantId, eventId: uuidv7(), event: 'call.ended', url: 'https://a.example/', statusCode: 200, success: true, attemptCount: 1, error: null, requestedAt: ms, completedAt: ms + 5 })
  }
  return rows.sort((x, y) => y.ms - x.ms || (x.id < y.id ? 1 : x.id > y.id ? -1 : 0)).map(r => r.id)
}

/** Every requestedAt no later than the one before it. */
const isNewestFirst = (data: Array<{ requestedAt: string }>) =>
  data.every((d, i) => i === 0 || Date.parse(d.requestedAt) <= Date.parse(data[i - 1]!.requestedAt))

const problem = (slug: string, status: number, extra: Record<string, unknown> = {}) =>
  ({ type: `${BASE}/errors/${slug}`, status, title: String, detail: String, instance: /^urn:maskline:err:/, ...extra })

t.test('register, read back, register again', async t => {
  const api = await start(t)
  const { token } = await api.tenant()
  t.same((await api.request('GET', '/v1/webhooks', { token })).body, { url: null, events: [], hasSecret: false, recentDeliveries: [] })

  const r1 = await api.request('POST', '/v1/webhooks', { token, body: { url: 'https://hooks.example.com/in?x=1', events: ['session.created', 'call.ended', 'call.ended'] } })
  t.equal(r1.status, 201)
  t.match(r1.body, { url: 'https://hooks.example.com/in?x=1', secret: /^whsec_[A-Za-z0-9+/]{43}=$/, events: ['session.created', 'call.ended'] })
  const got = await api.request('GET', '/v1/webhooks', { token })
  t.same(got.body, { url: 'https://hooks.example.com/in?x=1', events: ['session.created', 'call.ended'], hasSecret: true, recentDeliveries: [] })
  t.notOk(JSON.stringify(got.body).includes('whsec_'), 'the secret is never returned by GET')

  const r2 = await api.request('POST', '/v1/webhooks', { token, body: { url: 'https://other.example.com/hook', events: ['sms.sent'] } })
  t.equal(r2.status, 201)
  t.not(r2.body.secret, r1.body.secret, 'a new secret at each registration')
  t.match((await api.request('GET', '/v1/webhooks', { token })).body, { url: 'https://other.example.com/hook', events: ['sms.sent'] })
  t.notOk(api.logs.some(l => l.includes(r1.body.secret) || l.includes(r2.body.secret)), 'secrets are not logged')
})

t.test('validation: https, public host, known subscribable events', async t => {
  const api = await start(t)
  const { token } = await api.tenant()
  const post = (body: unknown) => api.request('POST', '/v1/webhooks', { token, body })
  const cases: Array<[unknown, string]> = [
    [{ url: 'https://hooks.example.com/x', events: [] }, 'events'],
    [{ url: 'https://hooks.example.com/x' }, 'events'],
    [{ events: ['session.created'] }, 'url'],
    [{ url: 'https://hooks.example.com/x', events: ['session.target_swapped'] }, 'events'],
    [{ url: 'https://hooks.example.com/x', events: ['session.created', 'nope'] }, 'events'],
  ]
  for (const [body, field] of cases) {
    const r = await post(body)
    t.equal(r.status, 400, JSON.stringify(body))
    t.match(r.headers.get('content-type'), /^application\/problem\+json/)
    t.match(r.body, problem('validation', 400))
    t.ok(r.body.errors.some((e: { field: string }) => e.field.includes(field)), `${JSON.stringify(body)} names ${field}`)
  }
  const urls: Array<[string, string]> = [
    ['http://hooks.example.com/x', 'https_required'],
    ['https://127.0.0.1/x', 'non_public_address'],
    ['https://2130706433/x', 'non_public_address'],
    ['https://[::1]/x', 'non_public_address'],
    ['https://169.254.169.254/latest', 'non_public_address'],
    ['https://localhost/x', 'non_public_address'],
    ['https://user:pw@hooks.example.com/x', 'credentials_not_allowed'],
    ['not a url', 'invalid_url'],
    ['ftp://hooks.example.com/x', 'invalid_url'],
  ]
  for (const [url, issue] of urls) {
    const r = await post({ url, events: ['session.created'] })
    t.equal(r.status, 400, url)
    t.match(r.body, problem('validation', 400, { errors: [{ field: 'url', issue }] }), url)
  }
  // WEBHOOK_ALLOW_INSECURE: http and loopback allowed (development and tests)
  api.services.config.webhookAllowInsecure = true
  t.equal((await post({ url: 'http://127.0.0.1:9/x', events: ['session.created'] })).status, 201)
})

t.test('tenant tokens only', async t => {
  const api = await start(t)
  const { id } = await api.tenant()
  t.match(await api.request('GET', '/v1/webhooks'), { status: 401, body: problem('unauthorized', 401) })
  const user = await issueToken(api.jwtSecret, { typ: 'user', sub: uuidv7(), tenantId: id, tier: 'STARTER', role: 'OWNER' }, Date.now())
  for (const [m, p] of [['GET', '/v1/webhooks'], ['POST', '/v1/webhooks/test'], ['GET', '/v1/webhooks/logs']] as const) {
    t.match(await api.request(m, p, { token: user }), { status: 403, body: problem('forbidden', 403) }, `${m} ${p}`)
  }
})

t.test('the test event: no-webhook without a URL, else enqueued and really delivered, signed', async t => {
  const api = await start(t)
  const { id, token } = await api.tenant()
  t.match(await api.request('POST', '/v1/webhooks/test', { token }), { status: 400, body: problem('no-webhook', 400) })

  api.services.config.webhookAllowInsecure = true
  const receiver = await startWebhookReceiver()
  t.teardown(() => receiver.close())
  // subscribed to something else: the test event is delivered anyway
  const reg = await api.request('POST', '/v1/webhooks', { token, body: { url: receiver.url, events: ['call.ended'] } })
  receiver.setSecret(reg.body.secret)
  const r = await api.request('POST', '/v1/webhooks/test', { token })
  t.equal(r.status, 202)
  t.match(r.body, {
    enqueued: true,
    event: { id: /^[0-9a-f-]{36}$/, type: 'session.created', createdAt: /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/, data: { sessionId: /^[0-9a-f-]{36}$/, tenantId: id, proxyNumber: /^\+\d+$/, test: true } },
  })
  t.same(Object.keys(r.body.event.data).sort(), ['proxyNumber', 'sessionId', 'tenantId', 'test'])
  await receiver.waitFor(1, 5_000)
  const d = receiver.deliveries[0]!
  t.ok(d.verified, 'signed with the secret returned at registration')
  t.same(d.json, r.body.event, 'the delivered envelope is the one answered')
  t.equal(d.id, r.body.event.id)
  t.ok(verifyDelivery(reg.body.secret, d.body, d.headers), 'the standardwebhooks package verifies it')

  // the attempt shows in GET /v1/webhooks and in the log
  let recent: unknown[] = []
  for (let i = 0; i < 50 && recent.length === 0; i++) {
    recent = (await api.request('GET', '/v1/webhooks', { token })).body.recentDeliveries
    if (!recent.length) await new Promise(res => setTimeout(res, 20))
  }
  t.match(recent, [{ event: 'session.created', url: receiver.url, statusCode: 200, success: true, attemptCount: 1, error: null, requestedAt: String, completedAt: String }])
  const logs = await api.request('GET', '/v1/webhooks/logs', { token })
  t.match(logs.body, { data: [{ event: 'session.created', success: true }], pagination: { count: 1, after: null } })
})

t.test('delivery log: envelope, newest first, limit bounds, cursor', async t => {
  const api = await start(t)
  const { id, token } = await api.tenant()
  const other = await api.tenant()
  const at = Date.parse('2026-02-01T00:00:00.000Z')
  // groups of ten share a millisecond; newest first is the order the log must answer in
  const newestFirst = await insertDeliveries(api.db.pool, id, 120, at)
  const first = await api.request('GET', '/v1/webhooks/logs', { token })
  t.equal(first.status, 200)
  t.equal(first.body.data.length, 50, 'default limit 50')
  t.equal(first.body.pagination.count, 50)
  t.type(first.body.pagination.after, 'string')
  t.same(Object.keys(first.body.data[0]).sort(), ['attemptCount', 'completedAt', 'error', 'event', 'id', 'requestedAt', 'statusCode', 'success', 'url'])
  t.same(first.body.data.map((d: { id: string }) => d.id), newestFirst.slice(0, 50), 'the first page is the 50 newest, newest first')
  t.ok(isNewestFirst(first.body.data), 'requestedAt never increases down the page')
  t.equal(first.body.data[0].requestedAt, '2026-02-01T00:00:00.011Z', 'it starts at the newest millisecond')

  const seen: string[] = []
  const walked: Array<{ requestedAt: string }> = []
  let after: string | null = null
  do {
    const q: string = after ? `?limit=7&after=${encodeURIComponent(after)}` : '?limit=7'
    const page = await api.request('GET', `/v1/webhooks/logs${q}`, { token })
    t.equal(page.status, 200)
    seen.push(...page.body.data.map((d: { id: string }) => d.id))
    walked.push(...page.body.data)
    after = page.body.pagination.after
  } while (after)
  t.equal(seen.length, 120)
  t.same([...seen].sort(), [...newestFirst].sort(), 'every row exactly once')
  t.same(seen, newestFirst, 'the pages walk newest first: requestedAt DESC, then id DESC within a millisecond')
  t.ok(isNewestFirst(walked), 'requestedAt never increases across the pages')

  const all = await api.request('GET', '/v1/webhooks/logs?limit=200', { token })
  t.same(all.body.data.map((d: { id: string }) => d.id), newestFirst, 'one page of 200: the same order')
  for (const q of ['?limit=0', '?limit=201', '?limit=x', '?after=yesterday']) {
    t.match(await api.request('GET', `/v1/webhooks/logs${q}`, { token }), { status: 400, body: problem('validation', 400) }, q)
  }
  const iso = await api.request('GET', `/v1/webhooks/logs?after=${encodeURIComponent('2026-02-01T00:00:00.005Z')}&limit=200`, { token })
  t.equal(iso.body.data.length, 50, 'a bare ISO timestamp: rows strictly older')
  t.same((await api.request('GET', '/v1/webhooks/logs', { token: other.token })).body, { data: [], pagination: { count: 0, after: null } })
})

t.test('GET /v1/webhooks: recentDeliveries are the 50 newest when more rows exist', async t => {
  const api = await start(t)
  const { id, token } = await api.tenant()
  const other = await api.tenant()
  const at = Date.parse('2026-03-01T00:00:00.000Z')
  const newestFirst = await insertDeliveries(api.db.pool, id, 75, at)
  // another tenant's rows, all newer: they must not take any of the 50 places
  await insertDeliveries(api.db.pool, other.id, 20, at + 1_000)
  const got = await api.request('GET', '/v1/webhooks', { token })
  t.equal(got.status, 200)
  const recent = got.body.recentDeliveries as Array<{ id: string; requestedAt: string }>
  t.equal(recent.length, 50, '75 rows exist: capped at 50')
  t.same(recent.map(d => d.id), newestFirst.slice(0, 50), 'the 50 newest of this tenant, newest first')
  t.ok(isNewestFirst(recent), 'requestedAt never increases down the list')
  t.match(recent[0], { event: 'call.ended', url: 'https://a.example/', statusCode: 200, success: true, attemptCount: 1, error: null, requestedAt: '2026-03-01T00:00:00.007Z', completedAt: '2026-03-01T00:00:00.012Z' })
  const logs = await api.request('GET', '/v1/webhooks/logs', { token })
  t.same(recent, logs.body.data, 'the same rows as the first page of the delivery log')
  t.equal((await api.request('GET', '/v1/webhooks', { token: other.token })).body.recentDeliveries.length, 20, 'the other tenant sees its own 20')
})
