// Contract 4.8: pool counts (from the engine hook) and provisioning (501 for an OWNER).
import t from 'tap'
import { sql } from 'slonik'
import type { PoolEntry } from '../../api/services.js'
import { problems } from '../../api/problems.js'
import { hashPassword } from '../../api/auth/passwords.js'
import { uuidv7 } from '../../sql/vocabulary/ids.js'
import { startApi, problem } from '../gateway/harness.js'
import { startTestService } from '../support/service.js'

t.test('GET /v1/numbers/pool: the engine counts, allow-listed', async t => {
  const pools = [
    { region: 'US', provider: 'telnyx', total: 100, available: 97, inUse: 2, cooldown: 1, numbers: ['+12025550100'] },
    { region: 'GB', provider: 'telnyx', total: 10, available: 10, inUse: 0, cooldown: 0 },
  ] as PoolEntry[]
  const api = await startApi(t, { services: { poolCounts: () => pools } })
  const a = await api.signup()
  const r = await api.get('/v1/numbers/pool', { token: a.accessToken })
  t.equal(r.status, 200)
  t.same(r.body, { pools: [
    { region: 'US', provider: 'telnyx', total: 100, available: 97, inUse: 2, cooldown: 1 },
    { region: 'GB', provider: 'telnyx', total: 10, available: 10, inUse: 0, cooldown: 0 },
  ] })
  t.notMatch(r.text, /\+1202/, 'the numbers themselves are not listed')
  t.equal(r.headers.get('x-ratelimit-policy'), 'sliding-window-60s')
  const user = await api.login(a.email, a.password)
  t.equal((await api.get('/v1/numbers/pool', { token: user })).status, 403)
  t.equal((await api.get('/v1/numbers/pool')).status, 401)
})

// What the service computes, not what a test injected: the engine's pool through the real
// composition root, as sessions take numbers and expiry releases them into cooldown.
t.test('GET /v1/numbers/pool: the counts follow allocation, expiry and cooldown', async t => {
  let now = Date.UTC(2026, 0, 5, 12)
  const api = await startTestService(t, { now: () => now, env: { NUMBER_POOL: 'US:+12025550100-+12025550103', NUMBER_COOLDOWN_SECONDS: '600' } })
  const acct = await api.signup()
  const pool = async () => {
    // a fresh token each time: the clock moves past an access token's lifetime
    const token = (await api.req('POST', '/v1/auth/token', { body: { apiKey: acct.apiKey, apiSecret: acct.apiSecret } })).body.accessToken
    return (await api.req('GET', '/v1/numbers/pool', { token })).body.pools
  }
  const first = await pool()
  const provider = first[0].provider
  t.type(provider, 'string')
  const us = (c: { total: number; available: number; inUse: number; cooldown: number }) => [{ region: 'US', provider, ...c }]
  t.same(first, us({ total: 4, available: 4, inUse: 0, cooldown: 0 }))

  const A = api.phone(1), B = api.phone(2), C = api.phone(3)
  const s1 = await api.req('POST', '/v1/sessions', { token: acct.token, body: { agentPhone: A, customerPhone: B, maxDurationMinutes: 5, gracePeriodMinutes: 0 } })
  // The agent is in both sessions, so a second proxy number is needed to tell them apart.
  const s2 = await api.req('POST', '/v1/sessions', { token: acct.token, body: { agentPhone: A, customerPhone: C, maxDurationMinutes: 60 } })
  t.same([s1.status, s2.status], [201, 201])
  t.not(s1.body.proxyNumber, s2.body.proxyNumber)
  t.same(await pool(), us({ total: 4, available: 2, inUse: 2, cooldown: 0 }))

  now += 6 * 60_000
  t.equal(await api.svc.expireDue(), 1, 'the five-minute session expires')
  t.same(await pool(), us({ total: 4, available: 2, inUse: 1, cooldown: 1 }), 'its number cools down before reuse')
  now += 10 * 60_000 + 1
  t.same(await pool(), us({ total: 4, available: 3, inUse: 1, cooldown: 0 }), 'and is available after the cooldown')
})

t.test('GET /v1/numbers/pool without an engine: an empty list', async t => {
  const api = await startApi(t)
  const a = await api.signup()
  t.same((await api.get('/v1/numbers/pool', { token: a.accessToken })).body, { pools: [] })
})

t.test('POST /v1/numbers/provision: 501 {error} for an OWNER, after validation', async t => {
  const api = await startApi(t)
  const a = await api.signup()
  const owner = await api.login(a.email, a.password)
  const r = await api.post('/v1/numbers/provision', { token: owner, body: { region: 'US', count: 5 } })
  t.equal(r.status, 501)
  t.equal(r.headers.get('content-type'), 'application/json', 'not a problem document (contract 7.2)')
  t.same(Object.keys(r.body), ['error'])
  t.type(r.body.error, 'string')

  const cases: [Record<string, unknown>, { field: string; issue: string }[]][] = [
    [{ region: 'US', count: 0 }, [{ field: 'count', issue: 'out_of_range' }]],
    [{ region: 'US', count: 101 }, [{ field: 'count', issue: 'out_of_range' }]],
    [{ region: 'US', count: 2.5 }, [{ field: 'count', issue: 'invalid_type' }]],
    [{ region: 'United States', count: 1 }, [{ field: 'region', issue: 'invalid_format' }]],
    [{}, [{ field: 'region', issue: 'required' }, { field: 'count', issue: 'required' }]],
  ]
  for (const [body, errors] of cases) {
    const v = await api.post('/v1/numbers/provision', { token: owner, body })
    t.equal(v.status, 400, JSON.stringify(body))
    t.same(v.body, { ...problem('validation', 400), title: problems.validation.title, detail: 'The request has invalid fields', instance: v.body.instance, errors })
  }
})

t.test('POST /v1/numbers/provision: tenant tokens and non-OWNERs are forbidden', async t => {
  const api = await startApi(t)
  const a = await api.signup()
  const tenant = await api.post('/v1/numbers/provision', { token: a.accessToken, body: { region: 'US', count: 1 } })
  t.equal(tenant.status, 403)
  t.same(tenant.body, { ...problem('forbidden', 403), title: problems.forbidden.title, detail: 'This endpoint needs a dashboard user token', instance: tenant.body.instance })
  await api.db.query(sql.unsafe`INSERT INTO users (id, tenant_id, email, password_hash, role)
    VALUES (${uuidv7()}, ${a.tenantId}, 'admin@numbers.example', ${await hashPassword('admin password')}, 'ADMIN')`)
  const admin = await api.login('admin@numbers.example', 'admin password')
  const r = await api.post('/v1/numbers/provision', { token: admin, body: { region: 'US', count: 1 } })
  t.equal(r.status, 403)
  t.equal(r.body.detail, 'This endpoint needs the role OWNER')
  t.equal((await api.post('/v1/numbers/provision', { body: { region: 'US', count: 1 } })).status, 401)
})
