// Contract 5.2/5.3, contract D3: which token is accepted where, and every way a token can be wrong.
import { randomBytes } from 'node:crypto'
import t from 'tap'
import { SignJWT } from 'jose'
import { sql } from 'slonik'
import { problems } from '../../api/problems.js'
import { createAuthenticator } from '../../api/auth/authenticate.js'
import { issueToken, keyId } from '../../api/auth/tokens.js'
import { ApiProblem } from '../../api/route.js'
import { startApi, problem } from '../gateway/harness.js'
import { fixedDirectory } from '../support/auth-directory.js'

t.test('token types are not interchangeable: 403 forbidden', async t => {
  const api = await startApi(t)
  const a = await api.signup()
  const user = await api.login(a.email, a.password)
  const onTenantRoute = await api.get('/v1/numbers/pool', { token: user })
  t.equal(onTenantRoute.status, 403)
  t.same(onTenantRoute.body, { ...problem('forbidden', 403), title: problems.forbidden.title, detail: 'This endpoint needs a tenant (API key) token', instance: onTenantRoute.body.instance })
  const onUserRoute = await api.patch('/v1/config', { token: a.accessToken, body: { defaultGracePeriod: 5 } })
  t.equal(onUserRoute.status, 403)
  t.equal(onUserRoute.body.detail, 'This endpoint needs a dashboard user token')
  const onProvision = await api.post('/v1/numbers/provision', { token: a.accessToken, body: { region: 'US', count: 1 } })
  t.equal(onProvision.status, 403)
  // contract 5.2: devices, config reads and tenants/me take both.
  for (const token of [a.accessToken, user]) {
    t.equal((await api.get('/v1/config', { token })).status, 200)
    t.equal((await api.get('/v1/tenants/me', { token })).status, 200)
    t.equal((await api.get('/v1/devices/presence?userPhone=%2B12025550111', { token })).status, 200)
  }
})

t.test('missing, malformed, forged or expired tokens: 401', async t => {
  const api = await startApi(t)
  const a = await api.signup()
  const key = api.services.jwtSecret
  const now = Math.floor(api.services.now() / 1000)
  const good = { typ: 'tenant', tenantId: a.tenantId, tier: 'STARTER', scopes: ['api'] }
  const sign = (claims: Record<string, unknown>, o: { alg?: string; kid?: string; iss?: string; aud?: string; exp?: number; secret?: Uint8Array; typ?: string } = {}) =>
    new SignJWT(claims)
      .setProtectedHeader({ alg: o.alg ?? 'HS256', typ: o.typ ?? 'JWT', kid: o.kid ?? keyId(key) })
      .setIssuer(o.iss ?? 'maskline').setAudience(o.aud ?? 'maskline:tenant').setSubject('s')
      .setIssuedAt(now).setExpirationTime(o.exp ?? now + 900).setJti('j')
      .sign(o.secret ?? key)
  const b64 = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url')
  const valid = await sign(good)
  t.equal((await api.get('/v1/numbers/pool', { token: valid })).status, 200, 'the control token works')

  const cases: [string, Record<string, string>, string][] = [
    ['no header', {}, 'Missing Authorization header'],
    ['Basic scheme', { authorization: 'Basic dXNlcjpwYXNz' }, 'The Authorization header must be "Bearer <token>"'],
    ['not a JWT', { authorization: 'Bearer abc' }, 'The access token is malformed'],
    ['alg none', { authorization: `Bearer ${b64({ alg: 'none', typ: 'JWT' })}.${valid.split('.')[1]}.x` }, 'The access token is not valid'],
    ['HS512', { authorization: `Bearer ${await sign(good, { alg: 'HS512' })}` }, 'The access token is not valid'],
    ['another key', { authorization: `Bearer ${await sign(good, { secret: randomBytes(32) })}` }, 'The access token is not valid'],
    ['another kid', { authorization: `Bearer ${await sign(good, { kid: 'old-key' })}` }, 'The access token is not valid'],
    ['another issuer', { authorization: `Bearer ${await sign(good, { iss: 'evil' })}` }, 'The access token is not valid'],
    ['audience and typ disagree', { authorization: `Bearer ${await sign(good, { aud: 'maskline:user' })}` }, 'The access token is not valid'],
    ['header typ', { authorization: `Bearer ${await sign(good, { typ: 'at+jwt' })}` }, 'The access token is not valid'],
    ['no tenantId', { authorization: `Bearer ${await sign({ ...good, tenantId: undefined })}` }, 'The access token is not valid'],
    ['unknown tier', { authorization: `Bearer ${await sign({ ...good, tier: 'PLATINUM' })}` }, 'The access token is not valid'],
    // `valid` is cached by now (the control request): its signature under other claims must still
    // be verified, and refused, whatever the token cache is keyed by.
    ['tampered payload', { authorization: `Bearer ${valid.split('.')[0]}.${b64({ ...decode(valid), tier: 'ENTERPRISE' })}.${valid.split('.')[2]}` }, 'The access token is not valid'],
    ['expired', { authorization: `Bearer ${await sign(good, { exp: now - 1 })}` }, 'The access token has expired'],
    ['tenant that does not exist', { authorization: `Bearer ${await sign({ ...good, tenantId: '01890a5d-ac96-774b-bcce-b302099a8057' })}` }, 'The tenant of this token does not exist'],
  ]
  for (const [name, headers, detail] of cases) {
    const r = await api.get('/v1/numbers/pool', { headers })
    t.equal(r.status, 401, name)
    t.equal(r.headers.get('www-authenticate'), 'Bearer realm="maskline"', name)
    t.same(r.body, { ...problem('unauthorized', 401), title: problems.unauthorized.title, detail, instance: r.body.instance }, name)
  }
})

function decode(jwt: string): Record<string, unknown> {
  return JSON.parse(Buffer.from(jwt.split('.')[1]!, 'base64url').toString())
}

t.test('a cached token still expires on time', async t => {
  const api = await startApi(t)
  const a = await api.signup()
  t.equal((await api.get('/v1/numbers/pool', { token: a.accessToken })).status, 200)
  api.clock.advance(899_000)
  t.equal((await api.get('/v1/numbers/pool', { token: a.accessToken })).status, 200, 'valid up to 900 s')
  api.clock.advance(1_000)
  const r = await api.get('/v1/numbers/pool', { token: a.accessToken })
  t.equal(r.status, 401)
  t.equal(r.body.detail, 'The access token has expired')
})

t.test('a suspended tenant is refused at once, its token exchange too', async t => {
  const api = await startApi(t)
  const a = await api.signup()
  t.equal((await api.get('/v1/config', { token: a.accessToken })).status, 200)
  t.equal((await api.post('/v1/auth/token', { body: { apiKey: a.apiKey, apiSecret: a.apiSecret } })).status, 200, 'key and tenant now in the directory')
  // What TenantDirectory.setStatus does (the cross-node case: test/api/tenant-directory.test.ts).
  await api.db.query(sql.unsafe`UPDATE tenants SET status = 'SUSPENDED' WHERE id = ${a.tenantId}`)
  api.services.authenticator.changed(a.tenantId)
  const r = await api.get('/v1/config', { token: a.accessToken })
  t.equal(r.status, 403)
  t.same(r.body, { ...problem('forbidden', 403), title: problems.forbidden.title, detail: 'The tenant is suspended', instance: r.body.instance })
  const exchange = await api.post('/v1/auth/token', { body: { apiKey: a.apiKey, apiSecret: a.apiSecret } })
  t.equal(exchange.status, 403)
  const login = await api.post('/v1/auth/dashboard/login', { body: { email: a.email, password: a.password } })
  t.equal(login.status, 403)
})

t.test('authenticator: verified tokens are cached (bounded); the tenant is what the directory holds now', async t => {
  let now = 1_800_000_000_000
  const jwtSecret = randomBytes(32)
  const tenantId = '01890a5d-ac96-774b-bcce-b302099a8057'
  let status: 'ACTIVE' | 'SUSPENDED' = 'ACTIVE'
  let tier: 'GROWTH' | 'ENTERPRISE' = 'GROWTH'
  const directory = fixedDirectory(id => (id === tenantId ? { id, status, tier, salt: Buffer.alloc(32) } : null))
  const auth = createAuthenticator({ jwtSecret, now: () => now, tokenCacheMax: 2, directory })
  const token = await issueToken(jwtSecret, { typ: 'user', sub: 'u1', tenantId, tier: 'STARTER', role: 'ADMIN' }, now)
  const ctx = await auth.authenticate(`Bearer ${token}`, 'any')
  t.same(ctx, { typ: 'user', tenantId, tier: 'GROWTH', role: 'ADMIN', sub: 'u1' }, 'the tier in force is the tenant\'s current one')
  t.equal(await auth.authenticate(`bearer ${token}`, 'user', ['OWNER', 'ADMIN']), ctx, 'a hit returns the cached context')
  await t.rejects(async () => auth.authenticate(`Bearer ${token}`, 'user', ['OWNER']), new ApiProblem('forbidden', 'This endpoint needs the role OWNER'))
  status = 'SUSPENDED'
  now += 3_600_000
  await t.rejects(async () => auth.authenticate(`Bearer ${token}`, 'any'), new ApiProblem('forbidden', 'The tenant is suspended'), 'a suspension applies to a cached token at once')
  status = 'ACTIVE'
  tier = 'ENTERPRISE'
  t.equal((await auth.authenticate(`Bearer ${token}`, 'any')).tier, 'ENTERPRISE', 'and so does a tier change')
  auth.changed(tenantId)
  t.same(directory.changes, [tenantId], 'changes made through this node are passed to the directory')
  const stranger = await issueToken(jwtSecret, { typ: 'user', sub: 'u9', tenantId: '01890a5d-ac96-774b-bcce-b302099a8058', tier: 'STARTER', role: 'OWNER' }, now)
  const refused = await Promise.resolve(auth.authenticate(`Bearer ${stranger}`, 'any')).then(() => null, (e: unknown) => e)
  t.match(refused, { slug: 'unauthorized', detail: 'The tenant of this token does not exist' }, 'a tenant the directory does not hold: 401')
  // Bounded: two more tokens push the first out; it verifies again (and still works).
  for (const sub of ['u2', 'u3']) await auth.authenticate(`Bearer ${await issueToken(jwtSecret, { typ: 'user', sub, tenantId, tier: 'STARTER', role: 'OWNER' }, now)}`, 'any')
  t.equal((await auth.authenticate(`Bearer ${token}`, 'any')).sub, 'u1')
})
