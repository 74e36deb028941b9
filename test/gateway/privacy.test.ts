// Contract 1.2, 5.7, contract D8: no log line carries a phone number, a secret, a password or a
// token; no response carries a number it was not meant to (only supportPhone, the tenant's own).
import t from 'tap'
import { Type } from '@sinclair/typebox'
import { route } from '../../api/route.js'
import { startApi, ownRoutes } from './harness.js'

const PHONES = ['+12025550161', '+447700900162', '+12025550163']
const SUPPORT = '+12025550199'

const leaky = route({
  method: 'GET', path: '/t/leaky', auth: 'tenant', query: Type.Object({ userPhone: Type.String() }),
  response: { 200: Type.Object({ ok: Type.Boolean() }) }, problems: [],
  handler(req) {
    req.services.log.info({ userPhone: req.query.userPhone, nested: { customerPhone: PHONES[2] }, headers: req.headers }, 'a careless line')
    if (req.query.userPhone === PHONES[2]) throw new Error(`driver said: key (${PHONES[2]}) exists`)
    return { status: 200, body: { ok: true, agentPhone: req.query.userPhone } }
  },
})

t.test('a session of calls leaves no number, secret or token in logs or bodies', async t => {
  const api = await startApi(t, { routes: ownRoutes([leaky]) })
  const a = await api.signup({ password: 'privacy-password-1' })
  const exchanged = (await api.post('/v1/auth/token', { body: { apiKey: a.apiKey, apiSecret: a.apiSecret } })).body.accessToken
  const user = await api.login(a.email, a.password)
  const rotated = (await api.post('/v1/auth/rotate-key', { token: user })).body
  await api.post('/v1/auth/dashboard/login', { body: { email: a.email, password: 'wrong-password-2' } })
  await api.post('/v1/auth/signup', { body: { companyName: 'x', email: 'bad', password: 'short' } })

  for (const [i, phone] of PHONES.entries()) {
    const token = i % 2 ? user : exchanged
    await api.post('/v1/devices/token', { token, body: { userPhone: phone, token: `push-${i}`, platform: 'ios' } })
    await api.post('/v1/devices/presence', { token, body: { userPhone: phone, status: 'online', platform: 'android' } })
    await api.get(`/v1/devices/presence?userPhone=${encodeURIComponent(phone)}`, { token })
    await api.get(`/v1/devices/presence?userPhone=${phone}x`, { token })
    await api.post('/v1/devices/presence', { token, body: { userPhone: `${phone}99999`, status: 'online', platform: 'ios' } })
    await api.get(`/v1/nowhere?userPhone=${encodeURIComponent(phone)}`)
    await api.get(`/t/leaky?userPhone=${encodeURIComponent(phone)}`, { token: exchanged })
  }
  await api.patch('/v1/config', { token: user, body: { supportPhone: SUPPORT, expiredCallBehavior: 'REDIRECT_SUPPORT' } })
  await api.patch('/v1/config', { token: user, body: { supportPhone: '+1 202 555 0199' } })
  await api.get('/v1/config', { token: exchanged })

  const logs = api.rawLogs.join('')
  t.ok(api.rawLogs.length > 30, `${api.rawLogs.length} lines captured`)
  t.notMatch(logs, /\+\d{8,15}/, 'no phone number in any log line')
  for (const phone of [...PHONES, SUPPORT]) t.notOk(logs.includes(phone.slice(1)), `digits of ${phone} not logged`)
  for (const [name, secret] of Object.entries({
    apiKey: a.apiKey, apiSecret: a.apiSecret, rotatedSecret: rotated.apiSecret, rotatedKey: rotated.apiKey,
    password: a.password, wrongPassword: 'wrong-password-2', signupToken: a.accessToken, exchanged, user,
  })) t.notOk(logs.includes(secret), `${name} not logged`)
  t.notMatch(logs, /eyJ[A-Za-z0-9_-]{10,}\./, 'no JWT-looking string logged')
  t.notMatch(logs, /authorization|bearer/i, 'no Authorization header logged')

  const bodies = api.bodies.join('\n')
  for (const phone of PHONES) t.notOk(bodies.includes(phone.slice(1)), `${phone} never in a response`)
  t.notOk(bodies.includes('privacy-password-1') || bodies.includes('wrong-password-2') || bodies.includes('"short"'), 'passwords never echoed')
  t.notOk(bodies.includes('driver said'), 'no driver message in a response')
})
