// contract 8.4: signup is unauthenticated and each one costs a password hash and a tenant; 40
// concurrent signups for 45 s made 177-262 tenants. At most 20 per address and minute now.
import t from 'tap'
import { problems } from '../../api/problems.js'
import { BASE_URL, problem, startApi } from '../gateway/harness.js'

t.test('20 signups per address and minute, then 429 for that address only', async t => {
  const config = { publicBaseUrl: BASE_URL, nodeId: 'test', cooldownSeconds: 900, retentionDays: 90, webhookAllowInsecure: false, trustedProxies: ['127.0.0.1'] }
  const api = await startApi(t, { services: { config } })
  const from = (ip: string) => ({ 'x-forwarded-for': ip })
  const body = (i: number) => ({ companyName: `Burst ${i} ${process.pid} ${Date.now()}`, email: `burst-${i}-${process.pid}-${Date.now()}@example.com`, password: 'correct horse battery' })
  for (let i = 0; i < 20; i++) {
    const r = await api.post('/v1/auth/signup', { body: body(i), headers: from('198.51.100.20') })
    t.equal(r.status, 201, `signup ${i + 1}`)
    t.equal(r.headers.get('x-ratelimit-remaining'), String(19 - i))
  }
  const refused = await api.post('/v1/auth/signup', { body: body(20), headers: from('198.51.100.20') })
  t.equal(refused.status, 429)
  t.same(refused.body, { ...problem('rate-limit', 429), title: problems['rate-limit'].title, detail: 'At most 20 attempts per minute', instance: refused.body.instance })
  t.ok(Number(refused.headers.get('retry-after')) >= 1)
  t.equal((await api.post('/v1/auth/signup', { body: body(21), headers: from('198.51.100.21') })).status, 201, 'another address signs up')
  api.clock.advance(60_000)
  t.equal((await api.post('/v1/auth/signup', { body: body(22), headers: from('198.51.100.20') })).status, 201, 'a minute later, again')
})
