// Contract 4.7, contract D9: push tokens and presence, keyed by tenant and hashed userPhone.
import t from 'tap'
import { sql } from 'slonik'
import { problems } from '../../api/problems.js'
import { startApi, problem } from '../gateway/harness.js'

const USER = '+12025550131'
const Q = `?userPhone=${encodeURIComponent(USER)}`

t.test('push tokens: register (upsert), repeat, deactivate', async t => {
  const api = await startApi(t)
  const a = await api.signup()
  const body = { userPhone: USER, token: 'apns-token-1', platform: 'ios', appBundleId: 'com.acme.driver' }
  const r = await api.post('/v1/devices/token', { token: a.accessToken, body })
  t.equal(r.status, 204)
  t.equal(r.text, '')
  t.equal((await api.post('/v1/devices/token', { token: a.accessToken, body })).status, 204, 'repeating is safe')
  const salt = (await api.db.oneFirst(sql.unsafe`SELECT salt FROM tenants WHERE id = ${a.tenantId}`)) as Buffer
  const rows = await api.db.any(sql.unsafe`SELECT token, tenant_id, user_hash, platform, app_bundle_id, active FROM device_tokens WHERE tenant_id = ${a.tenantId}`)
  t.same(rows, [{ token: 'apns-token-1', tenant_id: a.tenantId, user_hash: api.services.hashParty(salt, USER), platform: 'ios', app_bundle_id: 'com.acme.driver', active: true }])

  const user = await api.login(a.email, a.password)
  t.equal((await api.post('/v1/devices/token', { token: user, body: { userPhone: USER, token: 'apns-token-1', platform: 'android' } })).status, 204, 'dashboard token accepted')
  t.equal(await api.db.oneFirst(sql.unsafe`SELECT platform FROM device_tokens WHERE token = 'apns-token-1'`), 'android')

  const d = await api.del('/v1/devices/token', { token: a.accessToken, body: { token: 'apns-token-1' } })
  t.equal(d.status, 204)
  t.equal(await api.db.oneFirst(sql.unsafe`SELECT active FROM device_tokens WHERE token = 'apns-token-1'`), false)
  t.equal((await api.del('/v1/devices/token', { token: a.accessToken, body: { token: 'never-registered' } })).status, 204)

  const q = await api.del('/v1/devices/token?token=apns-token-1', { token: a.accessToken })
  t.equal(q.status, 400, 'the token goes in the body, not the query')
  t.same(q.body.errors, [{ field: 'token', issue: 'required' }])
})

t.test('a token registered by one tenant cannot be taken over by another', async t => {
  const api = await startApi(t)
  const a = await api.signup()
  const b = await api.signup()
  await api.post('/v1/devices/token', { token: a.accessToken, body: { userPhone: USER, token: 'shared', platform: 'ios' } })
  t.equal((await api.post('/v1/devices/token', { token: b.accessToken, body: { userPhone: '+12025550132', token: 'shared', platform: 'android' } })).status, 204)
  await api.del('/v1/devices/token', { token: b.accessToken, body: { token: 'shared' } })
  t.same(await api.db.one(sql.unsafe`SELECT tenant_id, platform, active FROM device_tokens WHERE token = 'shared'`), { tenant_id: a.tenantId, platform: 'ios', active: true })
})

t.test('presence: offline until reported, then the latest report', async t => {
  const api = await startApi(t)
  const a = await api.signup()
  const none = await api.get(`/v1/devices/presence${Q}`, { token: a.accessToken })
  t.equal(none.status, 200)
  t.equal(none.text, '{"status":"offline","platform":null,"ts":null}')

  t.equal((await api.post('/v1/devices/presence', { token: a.accessToken, body: { userPhone: USER, status: 'online', platform: 'ios' } })).status, 204)
  const at = api.services.now()
  t.same((await api.get(`/v1/devices/presence${Q}`, { token: a.accessToken })).body, { status: 'online', platform: 'ios', ts: at })
  api.clock.advance(5_000)
  await api.post('/v1/devices/presence', { token: a.accessToken, body: { userPhone: USER, status: 'background', platform: 'android' } })
  t.same((await api.get(`/v1/devices/presence${Q}`, { token: a.accessToken })).body, { status: 'background', platform: 'android', ts: at + 5_000 })

  const b = await api.signup()
  t.same((await api.get(`/v1/devices/presence${Q}`, { token: b.accessToken })).body, { status: 'offline', platform: null, ts: null }, 'per tenant')
  const stored = JSON.stringify(await api.db.any(sql.unsafe`SELECT * FROM device_presence WHERE tenant_id IN (${a.tenantId}, ${b.tenantId})`))
  t.notMatch(stored, /2025550131/, 'the number is not stored')
})

t.test('devices: validation-error and 401', async t => {
  const api = await startApi(t)
  const a = await api.signup()
  const cases: [string, string, Record<string, unknown> | undefined, { field: string; issue: string }[]][] = [
    ['POST', '/v1/devices/token', { userPhone: '2025550131', token: '', platform: 'windows' }, [
      { field: 'userPhone', issue: 'invalid_format' }, { field: 'token', issue: 'too_short' }, { field: 'platform', issue: 'invalid_value' }]],
    ['POST', '/v1/devices/token', {}, [{ field: 'userPhone', issue: 'required' }, { field: 'token', issue: 'required' }, { field: 'platform', issue: 'required' }]],
    ['DELETE', '/v1/devices/token', { token: 5 }, [{ field: 'token', issue: 'invalid_type' }]],
    ['POST', '/v1/devices/presence', { userPhone: USER, status: 'away', platform: 'ios' }, [{ field: 'status', issue: 'invalid_value' }]],
    ['GET', '/v1/devices/presence?userPhone=%2B0123', undefined, [{ field: 'userPhone', issue: 'invalid_format' }]],
    ['GET', '/v1/devices/presence', undefined, [{ field: 'userPhone', issue: 'required' }]],
  ]
  for (const [method, path, body, errors] of cases) {
    const r = await api.request(method, path, { token: a.accessToken, body })
    t.equal(r.status, 400, `${method} ${path}`)
    t.same(r.body, { ...problem('validation-error', 400), title: problems['validation-error'].title, detail: 'The request has invalid fields', instance: r.body.instance, errors })
  }
  for (const [method, path] of [['POST', '/v1/devices/token'], ['DELETE', '/v1/devices/token'], ['POST', '/v1/devices/presence'], ['GET', `/v1/devices/presence${Q}`]] as const) {
    const r = await api.request(method, path, { body: method === 'GET' ? undefined : { token: 'x' } })
    t.equal(r.status, 401, `${method} ${path}`)
    t.equal(r.body.type, 'https://maskline.test/errors/unauthorized')
  }
})
