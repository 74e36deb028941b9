// Contract 4.1 and 5: signup, token exchange, dashboard login, key rotation.
import t from 'tap'
import { decodeJwt, decodeProtectedHeader } from 'jose'
import { sql } from 'slonik'
import { problems } from '../../api/problems.js'
import { hashPassword } from '../../api/auth/passwords.js'
import { uuidv7 } from '../../sql/vocabulary/ids.js'
import { BASE_URL, startApi, problem, type Api } from '../gateway/harness.js'

const API_KEY_RE = /^rk_live_[0-9a-f]{48}$/
const API_SECRET_RE = /^rs_[0-9a-f]{64}$/
const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

function rateHeaders(r: { headers: Headers }) {
  return ['x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset', 'x-ratelimit-policy', 'retry-after'].map(h => r.headers.get(h))
}

async function addUser(api: Api, tenantId: string, role: 'ADMIN' | 'OPERATOR', email: string, password: string) {
  await api.db.query(sql.unsafe`INSERT INTO users (id, tenant_id, email, password_hash, role)
    VALUES (${uuidv7()}, ${tenantId}, ${email}, ${await hashPassword(password)}, ${role})`)
}

t.test('signup creates a STARTER tenant, its OWNER and credentials; extra fields are ignored', async t => {
  const api = await startApi(t)
  const r = await api.post('/v1/auth/signup', {
    body: { companyName: 'Fresh Co', email: 'Owner@Fresh.example', password: 'correct horse', companySize: '11-50', useCase: 'delivery', plan: 'gold' },
  })
  t.equal(r.status, 201)
  t.equal(r.headers.get('cache-control'), 'no-store')
  t.same(Object.keys(r.body).sort(), ['accessToken', 'apiKey', 'apiSecret', 'tenantId', 'user'])
  t.match(r.body.tenantId, UUID_RE)
  t.match(r.body.apiKey, API_KEY_RE)
  t.match(r.body.apiSecret, API_SECRET_RE)
  t.same(r.body.user, { id: r.body.user.id, email: 'Owner@Fresh.example', role: 'OWNER', tenantId: r.body.tenantId })
  t.match(r.body.user.id, UUID_RE)

  const header = decodeProtectedHeader(r.body.accessToken)
  t.same({ alg: header.alg, typ: header.typ }, { alg: 'HS256', typ: 'JWT' })
  t.type(header.kid, 'string')
  const claims = decodeJwt(r.body.accessToken)
  t.match(claims, { iss: 'maskline', aud: 'maskline:tenant', typ: 'tenant', tenantId: r.body.tenantId, tier: 'STARTER', scopes: ['api'] })
  t.equal(claims.exp! - claims.iat!, 900, '15-minute token')
  t.type(claims.jti, 'string')

  const row = await api.db.one(sql.unsafe`SELECT tier, status, octet_length(salt) AS salt_len FROM tenants WHERE id = ${r.body.tenantId}`)
  t.same(row, { tier: 'STARTER', status: 'ACTIVE', salt_len: 32 })
  const cred = await api.db.one(sql.unsafe`SELECT octet_length(key_hash) AS k, octet_length(secret_mac) AS s FROM api_credentials WHERE tenant_id = ${r.body.tenantId}`)
  t.same(cred, { k: 32, s: 32 }, 'only hashes are stored')
  const stored = await api.db.oneFirst(sql.unsafe`SELECT password_hash FROM users WHERE id = ${r.body.user.id}`)
  t.match(stored, /^scrypt\$131072\$8\$1\$/)

  const me = await api.get('/v1/tenants/me', { token: r.body.accessToken })
  t.equal(me.status, 200, 'the signup token works at once')
})

t.test('signup validation', async t => {
  const api = await startApi(t)
  const cases: [Record<string, unknown>, { field: string; issue: string }[]][] = [
    [{ companyName: 'A', email: 'a@b.example', password: 'short77' }, [{ field: 'password', issue: 'too_short' }]],
    [{ companyName: 'A', email: 'a@b.example', password: 'x'.repeat(129) }, [{ field: 'password', issue: 'too_long' }]],
    [{ companyName: '', email: 'not-an-email', password: 'long enough' }, [{ field: 'companyName', issue: 'too_short' }, { field: 'email', issue: 'invalid_format' }]],
    [{ companyName: 'x'.repeat(256), email: 'a@b.example', password: 'long enough' }, [{ field: 'companyName', issue: 'too_long' }]],
    [{ email: 'a@b.example' }, [{ field: 'companyName', issue: 'required' }, { field: 'password', issue: 'required' }]],
  ]
  for (const [body, errors] of cases) {
    const r = await api.post('/v1/auth/signup', { body })
    t.equal(r.status, 400)
    t.same(r.body, { ...problem('validation', 400), title: problems.validation.title, detail: 'The request has invalid fields', instance: r.body.instance, errors })
  }
  t.notMatch(api.bodies.join(''), /short77|long enough/, 'passwords are never echoed')
})

t.test('signup conflicts: email or company already in use (case-insensitive)', async t => {
  const api = await startApi(t)
  const a = await api.signup({ companyName: 'Globex', email: 'hank@globex.example' })
  t.ok(a.tenantId)
  for (const body of [
    { companyName: 'Other', email: 'HANK@globex.example', password: 'long enough' },
    { companyName: 'GLOBEX', email: 'someone@else.example', password: 'long enough' },
  ]) {
    const r = await api.post('/v1/auth/signup', { body })
    t.equal(r.status, 409)
    t.same(r.body, { ...problem('conflict', 409), title: problems.conflict.title, detail: 'The email or the company name is already in use', instance: r.body.instance })
  }
  const count = await api.db.oneFirst(sql.unsafe`SELECT count(*) FROM tenants WHERE lower(name) IN ('globex', 'other')`)
  t.equal(Number(count), 1, 'nothing half-created')
})

t.test('token exchange', async t => {
  const api = await startApi(t)
  const a = await api.signup()
  const r = await api.post('/v1/auth/token', { body: { apiKey: a.apiKey, apiSecret: a.apiSecret } })
  t.equal(r.status, 200)
  t.same(r.body, { accessToken: r.body.accessToken, expiresIn: 900, tokenType: 'Bearer' })
  t.equal(r.headers.get('cache-control'), 'no-store')
  t.same(rateHeaders(r), ['10', '9', r.headers.get('x-ratelimit-reset'), 'sliding-window-60s', null])
  const claims = decodeJwt(r.body.accessToken)
  t.match(claims, { typ: 'tenant', aud: 'maskline:tenant', tenantId: a.tenantId, tier: 'STARTER' })
  t.equal(claims.exp! - claims.iat!, 900)
  t.equal((await api.get('/v1/numbers/pool', { token: r.body.accessToken })).status, 200)

  const wrongSecret = await api.post('/v1/auth/token', { body: { apiKey: a.apiKey, apiSecret: `rs_${'0'.repeat(64)}` } })
  t.equal(wrongSecret.status, 401)
  t.same(wrongSecret.body, { ...problem('unauthorized', 401), title: problems.unauthorized.title, detail: 'Unknown API key or wrong secret', instance: wrongSecret.body.instance })
  const unknownKey = await api.post('/v1/auth/token', { body: { apiKey: `rk_live_${'a'.repeat(48)}`, apiSecret: a.apiSecret } })
  t.equal(unknownKey.status, 401)
  t.equal(unknownKey.body.detail, wrongSecret.body.detail, 'unknown key and wrong secret look alike')

  const malformed = await api.post('/v1/auth/token', { body: { apiKey: 'rk_test_123', apiSecret: a.apiSecret.toUpperCase() } })
  t.equal(malformed.status, 400)
  t.same(malformed.body.errors, [{ field: 'apiKey', issue: 'invalid_format' }, { field: 'apiSecret', issue: 'invalid_format' }])
  const missing = await api.post('/v1/auth/token', { body: {} })
  t.same(missing.body.errors, [{ field: 'apiKey', issue: 'required' }, { field: 'apiSecret', issue: 'required' }])
})

t.test('token exchange: 10 per minute per key, then 429 with Retry-After', async t => {
  const api = await startApi(t)
  const a = await api.signup()
  const body = { apiKey: a.apiKey, apiSecret: a.apiSecret }
  const start = api.services.now()
  for (let i = 0; i < 10; i++) {
    const r = await api.post('/v1/auth/token', { body: i % 2 ? body : { ...body, apiSecret: `rs_${'1'.repeat(64)}` } })
    t.equal(r.status, i % 2 ? 200 : 401, `attempt ${i + 1}`)
    t.equal(r.headers.get('x-ratelimit-remaining'), String(9 - i))
    api.clock.advance(1_000)
  }
  const r = await api.post('/v1/auth/token', { body })
  t.equal(r.status, 429)
  t.same(r.body, { ...problem('rate-limit', 429), title: problems['rate-limit'].title, detail: 'At most 10 attempts per minute', instance: r.body.instance })
  // The oldest attempt (at `start`) ages out at start + 60 s; now is start + 10 s.
  t.same(rateHeaders(r), ['10', '0', String(Math.ceil((start + 60_000) / 1000)), 'sliding-window-60s', '50'])

  const other = await api.signup()
  t.equal((await api.post('/v1/auth/token', { body: { apiKey: other.apiKey, apiSecret: other.apiSecret } })).status, 200, 'another key is not throttled')

  api.clock.advance(50_000)
  const again = await api.post('/v1/auth/token', { body })
  t.equal(again.status, 200, 'the window slid past the oldest attempt')
  t.equal(again.headers.get('x-ratelimit-remaining'), '0')
})

t.test('dashboard login', async t => {
  const api = await startApi(t)
  const a = await api.signup({ email: 'Dana@Login.example', password: 'hunter2hunter2' })
  const r = await api.post('/v1/auth/dashboard/login', { body: { email: 'dana@login.example', password: 'hunter2hunter2' }, headers: { 'x-forwarded-for': '198.51.100.1' } })
  t.equal(r.status, 200)
  t.same(r.body, {
    accessToken: r.body.accessToken,
    user: { id: a.user.id, email: 'Dana@Login.example', role: 'OWNER', tenantId: a.tenantId },
    tenant: { id: a.tenantId, name: a.companyName, tier: 'STARTER', status: 'ACTIVE' },
  })
  t.same(rateHeaders(r), ['5', '4', r.headers.get('x-ratelimit-reset'), 'sliding-window-60s', null])
  const claims = decodeJwt(r.body.accessToken)
  t.match(claims, { typ: 'user', aud: 'maskline:user', role: 'OWNER', tenantId: a.tenantId, sub: a.user.id })
  t.equal(claims.exp! - claims.iat!, 86_400, '24-hour token')

  const wrong = await api.post('/v1/auth/dashboard/login', { body: { email: 'dana@login.example', password: 'hunter3hunter3' }, headers: { 'x-forwarded-for': '198.51.100.1' } })
  t.equal(wrong.status, 401)
  t.same(wrong.body, { ...problem('unauthorized', 401), title: problems.unauthorized.title, detail: 'Wrong email or password', instance: wrong.body.instance })
  const unknown = await api.post('/v1/auth/dashboard/login', { body: { email: 'nobody@login.example', password: 'hunter2hunter2' }, headers: { 'x-forwarded-for': '198.51.100.1' } })
  t.equal(unknown.status, 401)
  t.equal(unknown.body.detail, wrong.body.detail, 'an unknown email looks like a wrong password')
})

t.test('dashboard login: 5 attempts per minute per IP', async t => {
  // The terminator on loopback is TRUSTED_PROXY: its X-Forwarded-For names the client (contract 8.4).
  const config = { publicBaseUrl: BASE_URL, nodeId: 'test', cooldownSeconds: 900, retentionDays: 90, webhookAllowInsecure: false, trustedProxies: ['127.0.0.1'] }
  const api = await startApi(t, { services: { config } })
  const ip = { 'x-forwarded-for': '203.0.113.9, 198.51.100.77' } // the terminator appended the last one
  const body = { email: 'nobody@example.com', password: 'wrong password' }
  for (let i = 0; i < 5; i++) t.equal((await api.post('/v1/auth/dashboard/login', { body, headers: ip })).status, 401)
  const r = await api.post('/v1/auth/dashboard/login', { body, headers: ip })
  t.equal(r.status, 429)
  t.same(r.body, { ...problem('rate-limit', 429), title: problems['rate-limit'].title, detail: 'At most 5 attempts per minute', instance: r.body.instance })
  t.equal(r.headers.get('retry-after'), '60')
  t.equal(r.headers.get('x-ratelimit-remaining'), '0')
  const spoofed = await api.post('/v1/auth/dashboard/login', { body, headers: { 'x-forwarded-for': '203.0.113.10, 198.51.100.77' } })
  t.equal(spoofed.status, 429, 'client-supplied entries do not change the address')
  const elsewhere = await api.post('/v1/auth/dashboard/login', { body, headers: { 'x-forwarded-for': '198.51.100.78' } })
  t.equal(elsewhere.status, 401, 'another address is not throttled')
})

t.test('key rotation revokes the old pair at once', async t => {
  const api = await startApi(t)
  const a = await api.signup()
  const issued = (await api.post('/v1/auth/token', { body: { apiKey: a.apiKey, apiSecret: a.apiSecret } })).body.accessToken
  const owner = await api.login(a.email, a.password)
  const r = await api.post('/v1/auth/rotate-key', { token: owner })
  t.equal(r.status, 200)
  t.same(Object.keys(r.body).sort(), ['apiKey', 'apiSecret'])
  t.match(r.body.apiKey, API_KEY_RE)
  t.match(r.body.apiSecret, API_SECRET_RE)
  t.not(r.body.apiKey, a.apiKey)

  const old = await api.post('/v1/auth/token', { body: { apiKey: a.apiKey, apiSecret: a.apiSecret } })
  t.equal(old.status, 401, 'old pair refused on the next exchange')
  const fresh = await api.post('/v1/auth/token', { body: { apiKey: r.body.apiKey, apiSecret: r.body.apiSecret } })
  t.equal(fresh.status, 200)
  t.equal((await api.get('/v1/numbers/pool', { token: issued })).status, 200, 'tokens already issued live out their 15 minutes')

  const mixed = await api.post('/v1/auth/token', { body: { apiKey: r.body.apiKey, apiSecret: a.apiSecret } })
  t.equal(mixed.status, 401, 'the old secret does not pair with the new key')
})

t.test('key rotation needs a dashboard OWNER', async t => {
  const api = await startApi(t)
  const a = await api.signup()
  await addUser(api, a.tenantId, 'ADMIN', 'admin@rotate.example', 'admin password')
  const admin = await api.login('admin@rotate.example', 'admin password')
  const r = await api.post('/v1/auth/rotate-key', { token: admin })
  t.equal(r.status, 403)
  t.same(r.body, { ...problem('forbidden', 403), title: problems.forbidden.title, detail: 'This endpoint needs the role OWNER', instance: r.body.instance })
  const tenant = await api.post('/v1/auth/rotate-key', { token: a.accessToken })
  t.equal(tenant.status, 403)
  t.equal(tenant.body.detail, 'This endpoint needs a dashboard user token')
  const none = await api.post('/v1/auth/rotate-key')
  t.equal(none.status, 401)
  t.equal(none.headers.get('www-authenticate'), 'Bearer realm="maskline"')
  t.same(none.body, { ...problem('unauthorized', 401), title: problems.unauthorized.title, detail: 'Missing Authorization header', instance: none.body.instance })
  const count = await api.db.oneFirst(sql.unsafe`SELECT count(*) FROM api_credentials WHERE tenant_id = ${a.tenantId}`)
  t.equal(Number(count), 1, 'nothing rotated')
})
