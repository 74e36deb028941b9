// Contract 4.2 + 3.1 through the real service: create, get, patch, end, expiry, errors.
import t from 'tap'
import { startTestService } from '../support/service.js'

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/

t.test('session lifecycle', async t => {
  const api = await startTestService(t)
  const acct = await api.signup()
  const A = api.phone(1), B = api.phone(2)

  const created = await api.req('POST', '/v1/sessions', { token: acct.token, body: { agentPhone: A, customerPhone: B, metadata: { orderId: 'o-1' } } })
  t.equal(created.status, 201)
  const s = created.body
  t.match(s, {
    tenantId: acct.tenantId, state: 'ACTIVE', directionMode: 'BIDIRECTIONAL', metadata: { orderId: 'o-1' },
    gracePeriodMinutes: 15, maxDurationMinutes: 120, recordingEnabled: false, consentPrompt: 'DEFAULT',
    endedAt: null, expiredAt: null, callCount: 0, lastCallAt: null, proxyNumber: /^\+1202555/,
  })
  t.match(s.createdAt, ISO)
  t.equal(Date.parse(s.expiresAt) - Date.parse(s.activatedAt), 120 * 60_000, 'expiresAt = activation + maxDuration')
  t.notOk('agentPhone' in s || 'customerPhone' in s, 'real numbers are never returned')

  const got = await api.req('GET', `/v1/sessions/${s.id}`, { token: acct.token })
  t.equal(got.status, 200)
  t.same(got.body, s)

  t.test('cross-tenant read is 404', async t => {
    const other = await api.signup()
    const r = await api.req('GET', `/v1/sessions/${s.id}`, { token: other.token })
    t.equal(r.status, 404)
    t.match(r.headers.get('content-type'), /^application\/problem\+json/)
    t.match(r.body, { type: /\/errors\/not-found$/, status: 404, title: String, instance: /^urn:maskline:err:/ })
  })

  t.test('patch merges metadata and refuses unknown fields', async t => {
    const p = await api.req('PATCH', `/v1/sessions/${s.id}`, { token: acct.token, body: { metadata: { note: 'vip' } } })
    t.equal(p.status, 200)
    t.same(p.body.metadata, { orderId: 'o-1', note: 'vip' })
    const bad = await api.req('PATCH', `/v1/sessions/${s.id}`, { token: acct.token, body: { state: 'EXPIRED' } })
    t.equal(bad.status, 400)
    t.match(bad.body, { type: /\/errors\/validation$/, status: 400 })
  })

  t.test('end enters the grace period; grace patch extends expiry; end after expiry fails', async t => {
    const e = await api.req('POST', `/v1/sessions/${s.id}/end`, { token: acct.token })
    t.equal(e.status, 200)
    t.equal(e.body.state, 'GRACE_PERIOD')
    t.match(e.body.endedAt, ISO)
    t.equal(Date.parse(e.body.expiresAt) - Date.parse(e.body.endedAt), 15 * 60_000)
    const g = await api.req('PATCH', `/v1/sessions/${s.id}`, { token: acct.token, body: { gracePeriodMinutes: 30 } })
    t.equal(Date.parse(g.body.expiresAt) - Date.parse(e.body.endedAt), 30 * 60_000, 'expiresAt = endedAt + new grace')
    const z = await api.req('PATCH', `/v1/sessions/${s.id}`, { token: acct.token, body: { gracePeriodMinutes: 0 } })
    t.equal(z.status, 200)
    await api.svc.expireDue()
    const x = await api.req('GET', `/v1/sessions/${s.id}`, { token: acct.token })
    t.equal(x.body.state, 'EXPIRED')
    t.match(x.body.expiredAt, ISO)
    const again = await api.req('POST', `/v1/sessions/${s.id}/end`, { token: acct.token })
    t.equal(again.status, 400)
    t.match(again.body, { type: /\/errors\/session-end-failed$/, status: 400 })
  })

  t.test('validation errors', async t => {
    const bad = await api.req('POST', '/v1/sessions', { token: acct.token, body: { agentPhone: '415-555', customerPhone: B } })
    t.equal(bad.status, 400)
    t.match(bad.body, { type: /\/errors\/validation$/, errors: [{ field: 'agentPhone' }] })
    const mode = await api.req('POST', '/v1/sessions', { token: acct.token, body: { agentPhone: A, customerPhone: B, directionMode: 'SIDEWAYS' } })
    t.equal(mode.status, 400)
    const rrec = await api.req('POST', '/v1/sessions', { token: acct.token, body: { agentPhone: A, customerPhone: B, recordingEnabled: true, consentPrompt: 'NONE' } })
    t.equal(rrec.status, 400)
    t.match(rrec.body, { type: /\/errors\/validation$/, errors: [{ field: 'consentPrompt', issue: 'invalid_combination' }] })
    const missing = await api.req('GET', '/v1/sessions/01a201ae-0000-7000-8000-000000000000', { token: acct.token })
    t.equal(missing.status, 404)
    const user = await api.req('GET', '/v1/sessions', { token: acct.ownerToken })
    t.equal(user.status, 403, 'a dashboard token is refused on a tenant endpoint')
    const none = await api.req('GET', '/v1/sessions')
    t.equal(none.status, 401)
  })
})
