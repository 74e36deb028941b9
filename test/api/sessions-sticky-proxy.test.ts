// contract D10: stickyProxy on POST /v1/sessions, through REST on the service's own clock.
// The same agent and customer get the proxy of their newest session of the last 30 days when it
// can carry the session (free and out of cooldown, or held by the tenant with neither party live
// on it); otherwise, and without the flag, a proxy is allocated as usual. The overlap rule holds.
// (A number still cooling down is not taken: test/engine/session-options.test.ts.)
import t from 'tap'
import { startTestService } from '../support/service.js'

const MINUTE = 60_000
const DAY = 24 * 60 * MINUTE

t.test('sticky proxy', async t => {
  let offset = 0
  const api = await startTestService(t, { now: () => Date.now() + offset })
  const acct = await api.signup()
  let token = acct.token
  const advance = async (ms: number) => {
    offset += ms
    await api.svc.expireDue()
    token = (await api.req('POST', '/v1/auth/token', { body: { apiKey: acct.apiKey, apiSecret: acct.apiSecret } })).body.accessToken
    api.secrets.add(token)
  }
  const create = async (agentPhone: string, customerPhone: string, extra: Record<string, unknown> = {}) => {
    const r = await api.req('POST', '/v1/sessions', { token, body: { agentPhone, customerPhone, gracePeriodMinutes: 0, ...extra } })
    t.equal(r.status, 201, r.text.slice(0, 200))
    return r.body as { id: string; proxyNumber: string }
  }
  const end = (id: string) => api.req('POST', `/v1/sessions/${id}/end`, { token })
  const A = api.phone(1), C = api.phone(2), A2 = api.phone(3), C2 = api.phone(4)

  const first = await create(A, C)
  const other = await create(A2, C2)
  await end(first.id)
  await end(other.id)
  await advance(1_000) // expired: their proxies released, cooling down
  await advance(16 * MINUTE) // out of the 15-minute cooldown

  const plain = await create(A2, C2)
  t.not(plain.proxyNumber, other.proxyNumber, 'without stickyProxy: allocated as usual (a number never used comes first)')

  const sticky = await create(A, C, { stickyProxy: true })
  t.equal(sticky.proxyNumber, first.proxyNumber, 'the pair gets its proxy back')
  t.notOk('stickyProxy' in sticky, 'an instruction, not part of the session')

  // The pair live on its proxy: the overlap rule holds; a sticky create falls back.
  const again = await create(A, C, { stickyProxy: true })
  t.not(again.proxyNumber, first.proxyNumber, 'both parties are live on it: another proxy')
  const r = await api.req('POST', '/v1/sessions', { token, body: { agentPhone: A, customerPhone: api.phone(5), stickyProxy: true } })
  t.equal(r.status, 201, 'another customer of the agent: no previous pair session, allocated as usual')
  t.not(r.body.proxyNumber, first.proxyNumber, 'the agent is live on it')

  // Older than 30 days: not sticky any more.
  for (const id of [sticky.id, again.id, r.body.id, plain.id]) await end(id)
  await advance(31 * DAY)
  const late = await create(A2, C2, { stickyProxy: true })
  t.not(late.proxyNumber, plain.proxyNumber, 'the pair\'s newest session is 31 days old')

  // Another tenant's pair is not looked at: hashes are per tenant, and the lookup names the tenant.
  const other2 = await api.signup()
  const r2 = await api.req('POST', '/v1/sessions', { token: other2.token, body: { agentPhone: A, customerPhone: C, stickyProxy: true } })
  t.equal(r2.status, 201)
  t.not(r2.body.proxyNumber, first.proxyNumber, 'first tenant\'s proxy not reused for another tenant')
})
