// Contract 4.4: GET/PATCH /v1/config, GET /v1/tenants/me; R-REC on the tenant.
import t from 'tap'
import { sql } from 'slonik'
import type { TenantRouting } from '../../engine/types.js'
import { problems } from '../../api/problems.js'
import { hashPassword } from '../../api/auth/passwords.js'
import { uuidv7 } from '../../sql/vocabulary/ids.js'
import { startApi, problem, type Api } from '../gateway/harness.js'

const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/

async function withRole(api: Api, tenantId: string, role: 'ADMIN' | 'OPERATOR'): Promise<string> {
  const email = `${role.toLowerCase()}-${uuidv7()}@example.com`
  await api.db.query(sql.unsafe`INSERT INTO users (id, tenant_id, email, password_hash, role)
    VALUES (${uuidv7()}, ${tenantId}, ${email}, ${await hashPassword('role password')}, ${role})`)
  return api.login(email, 'role password')
}

t.test('GET /v1/config: the whole tenant object, nothing else', async t => {
  const api = await startApi(t)
  const a = await api.signup()
  const r = await api.get('/v1/config', { token: a.accessToken })
  t.equal(r.status, 200)
  t.match(r.body.createdAt, ISO)
  t.same(r.body, {
    id: a.tenantId, name: a.companyName, tier: 'STARTER', status: 'ACTIVE', webhookUrl: null, defaultGracePeriod: 15,
    expiredCallBehavior: 'DEAD_LINE', supportPhone: null, recordingEnabled: false, recordingConsentMode: 'DEFAULT',
    recordingConsentAudioUrl: null, pushConfig: {}, smsOptOutText: null, smsHelpText: null, createdAt: r.body.createdAt, updatedAt: r.body.updatedAt,
  })
  const me = await api.get('/v1/tenants/me', { token: a.accessToken })
  t.same(me.body, { tenant: r.body })
})

t.test('PATCH /v1/config: only sent fields change; the engine hook hears of it', async t => {
  const changed: TenantRouting[] = []
  const api = await startApi(t, { services: { onTenantChanged: tr => { changed.push(tr) } } })
  const a = await api.signup()
  const owner = await api.login(a.email, a.password)
  changed.length = 0
  const before = (await api.get('/v1/config', { token: owner })).body
  const r = await api.patch('/v1/config', {
    token: owner,
    body: { defaultGracePeriod: 30, expiredCallBehavior: 'REDIRECT_SUPPORT', supportPhone: '+12025550188', pushConfig: { apns: { topic: 'com.acme' } }, id: 'ignored' },
  })
  t.equal(r.status, 200)
  t.same(r.body, { ...before, defaultGracePeriod: 30, expiredCallBehavior: 'REDIRECT_SUPPORT', supportPhone: '+12025550188', pushConfig: { apns: { topic: 'com.acme' } }, updatedAt: r.body.updatedAt })
  t.same(changed, [{
    id: a.tenantId, tier: 'STARTER', expiredCallBehavior: 'REDIRECT_SUPPORT', supportPhone: '+12025550188', recordingConsentAudioUrl: null,
    smsTexts: { smsOptOutText: null, smsHelpText: null }, // contract D11: the SMS texts ride along, applied at once
  }])

  const second = await api.patch('/v1/config', { token: owner, body: { recordingEnabled: true, recordingConsentMode: 'CUSTOM', recordingConsentAudioUrl: 'https://cdn.acme.example/consent.mp3', webhookUrl: 'https://hooks.acme.example/mask' } })
  t.equal(second.status, 200)
  t.match(second.body, { defaultGracePeriod: 30, recordingEnabled: true, recordingConsentMode: 'CUSTOM', recordingConsentAudioUrl: 'https://cdn.acme.example/consent.mp3', webhookUrl: 'https://hooks.acme.example/mask' })
  t.same((await api.get('/v1/config', { token: a.accessToken })).body, second.body, 'reads see the change')

  const cleared = await api.patch('/v1/config', { token: owner, body: { supportPhone: null, expiredCallBehavior: 'DEAD_LINE' } })
  t.equal(cleared.body.supportPhone, null)
})

t.test('PATCH /v1/config: validation-error, R-REC included', async t => {
  const api = await startApi(t)
  const a = await api.signup()
  const owner = await api.login(a.email, a.password)
  const invalid = async (body: Record<string, unknown>, errors: { field: string; issue: string }[], detail = 'The request has invalid fields') => {
    const r = await api.patch('/v1/config', { token: owner, body })
    t.equal(r.status, 400, JSON.stringify(body))
    t.same(r.body, { ...problem('validation-error', 400), title: problems['validation-error'].title, detail, instance: r.body.instance, errors })
  }
  await invalid({ expiredCallBehavior: 'HANG_UP' }, [{ field: 'expiredCallBehavior', issue: 'invalid_value' }])
  await invalid({ recordingConsentMode: 'LOUD', defaultGracePeriod: -1 }, [{ field: 'defaultGracePeriod', issue: 'out_of_range' }, { field: 'recordingConsentMode', issue: 'invalid_value' }])
  await invalid({ supportPhone: '555-0100' }, [{ field: 'supportPhone', issue: 'invalid_format' }])
  await invalid({ webhookUrl: 'ftp://x.example' }, [{ field: 'webhookUrl', issue: 'invalid_format' }])
  await invalid({ pushConfig: null, recordingEnabled: 'yes' }, [{ field: 'recordingEnabled', issue: 'invalid_type' }, { field: 'pushConfig', issue: 'invalid_type' }])
  await invalid({ webhookUrl: 'http://hooks.acme.example' }, [{ field: 'webhookUrl', issue: 'https_required' }], 'webhookUrl must be an https URL of a public host')
  const rrec = 'Recording cannot be enabled with recordingConsentMode NONE'
  await invalid({ recordingEnabled: true, recordingConsentMode: 'NONE' }, [{ field: 'recordingConsentMode', issue: 'invalid_combination' }], rrec)
  // R-REC holds against the stored values too, in both directions.
  t.equal((await api.patch('/v1/config', { token: owner, body: { recordingConsentMode: 'NONE' } })).status, 200)
  await invalid({ recordingEnabled: true }, [{ field: 'recordingConsentMode', issue: 'invalid_combination' }], rrec)
  t.equal((await api.patch('/v1/config', { token: owner, body: { recordingEnabled: true, recordingConsentMode: 'DEFAULT' } })).status, 200)
  await invalid({ recordingConsentMode: 'NONE' }, [{ field: 'recordingConsentMode', issue: 'invalid_combination' }], rrec)
  const stored = await api.db.one(sql.unsafe`SELECT recording_enabled, recording_consent_mode FROM tenants WHERE id = ${a.tenantId}`)
  t.same(stored, { recording_enabled: true, recording_consent_mode: 'DEFAULT' })
})

t.test('PATCH /v1/config: OWNER or ADMIN dashboard token only', async t => {
  const api = await startApi(t)
  const a = await api.signup()
  const admin = await withRole(api, a.tenantId, 'ADMIN')
  const operator = await withRole(api, a.tenantId, 'OPERATOR')
  t.equal((await api.patch('/v1/config', { token: admin, body: { defaultGracePeriod: 20 } })).status, 200, 'ADMIN')
  const op = await api.patch('/v1/config', { token: operator, body: { defaultGracePeriod: 21 } })
  t.equal(op.status, 403)
  t.same(op.body, { ...problem('forbidden', 403), title: problems.forbidden.title, detail: 'This endpoint needs the role OWNER or ADMIN', instance: op.body.instance })
  t.equal((await api.get('/v1/config', { token: operator })).status, 200, 'OPERATOR may read')
  t.equal((await api.patch('/v1/config', { token: a.accessToken, body: { defaultGracePeriod: 22 } })).status, 403, 'tenant token')
  t.equal((await api.patch('/v1/config', { body: { defaultGracePeriod: 23 } })).status, 401)
  t.equal((await api.get('/v1/config')).status, 401)
  t.equal((await api.get('/v1/config', { token: a.accessToken })).body.defaultGracePeriod, 20)
})

t.test('PATCH /v1/config: a name another tenant uses is a conflict', async t => {
  const api = await startApi(t)
  const a = await api.signup()
  const b = await api.signup()
  const owner = await api.login(a.email, a.password)
  const r = await api.patch('/v1/config', { token: owner, body: { name: b.companyName.toUpperCase() } })
  t.equal(r.status, 409)
  t.same(r.body, { ...problem('conflict', 409), title: problems.conflict.title, detail: 'Another tenant already uses this name', instance: r.body.instance })
})
