// Dual-proxy sessions end to end (docs/dual-proxy.md): a pinned create through the service's
// session commands, then voice and SMS callbacks both ways, each party dialling its own proxy and
// seeing the other presented from it; both numbers held and released as one; bound numbers out
// of native allocation, also for a node that has not heard of the binding (the create's SQL).
import t from 'tap'
import { sql } from 'slonik'
import { startTelnyxService } from '../support/service.js'
import { createPhoneCipher } from '../../sql/crypto.js'
import { getLiveSessionState, loadLiveSessions } from '../../sql/session-load.js'
import { createPinnedSession } from '../../sql/pinned-create.js'
import { ApiProblem } from '../../api/route.js'
import type { SessionRecord } from '../../engine/types.js'

/** The problem slug a command was refused with (ApiProblem), 'ok' if it was not. */
const refusal = (p: Promise<unknown>) => p.then(() => 'ok', (e: unknown) => (e instanceof ApiProblem ? e.slug : Promise.reject(e)))

const PA = '+12025550150'
const PB = '+12025550151'

t.test('dual-proxy sessions', async t => {
  const api = await startTelnyxService(t)
  const { driver, fake } = api
  const sessions = api.svc.services.sessions!
  const db = api.svc.db.pool
  const acct = await api.signup()
  const other = await api.signup()
  const A = api.phone(1), B = api.phone(2)

  t.equal(await sessions.bindNumber(acct.tenantId, PA), 'ok')
  t.equal(await sessions.bindNumber(acct.tenantId, PA), 'ok', 'idempotent')
  t.equal(await sessions.bindNumber(acct.tenantId, PB), 'ok')
  t.equal(await sessions.bindNumber(other.tenantId, PA), 'bound-elsewhere')
  t.equal(await refusal(sessions.createPinned(other.tenantId, { agentPhone: A, customerPhone: B, agentProxy: PA, customerProxy: PB })),
    'proxy-unavailable', 'another tenant cannot pin a bound number')

  const bad = { agentPhone: A, customerPhone: B, agentProxy: PA, customerProxy: PB }
  for (const over of [{ agentPhone: '0412' }, { customerProxy: 'x' }, { customerPhone: A }, { id: 'not-a-uuid' }]) {
    t.equal(await refusal(sessions.createPinned(acct.tenantId, { ...bad, ...over })), 'validation', JSON.stringify(Object.keys(over)))
  }
  t.equal(await db.oneFirst(sql.unsafe`SELECT count(*)::int FROM sessions`), 0, 'bad input changed nothing')
  const id = '0190c000-0000-7000-8000-000000000001'
  const rec = await sessions.createPinned(acct.tenantId, { agentPhone: A, customerPhone: B, agentProxy: PA, customerProxy: PB, id })
  t.match(rec, { id, proxyNumber: PA, customerProxyNumber: PB, state: 'ACTIVE' })
  t.same(await db.any(sql.unsafe`SELECT number, live_sessions, tenant_id FROM proxy_numbers WHERE number IN (${PA}, ${PB}) ORDER BY number`),
    [{ number: PA, live_sessions: 1, tenant_id: acct.tenantId }, { number: PB, live_sessions: 1, tenant_id: acct.tenantId }])
  t.equal(await db.oneFirst(sql.unsafe`SELECT live_sessions FROM tenants WHERE id = ${acct.tenantId}`), 1, 'one session against the quota')

  t.test('verify names the number each party dials', async t => {
    const auth = { token: acct.token }
    t.match((await api.req('GET', `/v1/sessions/verify?userPhone=${encodeURIComponent(A)}`, auth)).body, { sessionId: id, proxyNumber: PA })
    t.match((await api.req('GET', `/v1/sessions/verify?userPhone=${encodeURIComponent(B)}`, auth)).body, { sessionId: id, proxyNumber: PB })
  })

  t.test('voice both ways: each called party sees its own proxy', async t => {
    const toB = await (await driver.voice({ from: A, to: PA, callSid: 'CA-d1' })).text()
    t.match(toB, new RegExp(`callerId="\\${PB}"`))
    t.match(toB, new RegExp(`>\\${B}</Number>`))
    const toA = await (await driver.voice({ from: B, to: PB, callSid: 'CA-d2' })).text()
    t.match(toA, new RegExp(`callerId="\\${PA}"`))
    t.match(toA, new RegExp(`>\\${A}</Number>`))
    t.notMatch(await (await driver.voice({ from: A, to: PB, callSid: 'CA-d3' })).text(), /<Number>/, 'the agent is no party on the customer proxy')
    // The dialled leg's status (From: the presented proxy, To: the called party) finds the call's session.
    await api.svc.flushRecords()
    const calls = await db.anyFirst(sql.unsafe`SELECT direction FROM call_records WHERE session_id = ${id} ORDER BY direction`)
    t.same(calls, ['A_TO_B', 'B_TO_A'])
  })

  t.test('SMS both ways: forwarded from the recipient\'s own proxy', async t => {
    const before = fake.count
    t.same(await (await driver.smsReceived({ from: A, to: PA, text: 'hi B', messageId: 'dual-1' })).json(), { ok: true })
    t.same(await (await driver.smsReceived({ from: B, to: PB, text: 'hi A', messageId: 'dual-2' })).json(), { ok: true })
    t.equal(fake.count, before + 2)
    const sent = fake.requests.filter(q => q.path === '/v2/messages').slice(-2).map(q => q.body as Record<string, string>)
    t.match(sent[0], { from: PB, to: B, text: 'hi B' })
    t.match(sent[1], { from: PA, to: A, text: 'hi A' })
  })

  t.test('the store gives back both numbers (boot load, another node\'s reload)', async t => {
    const cipher = createPhoneCipher(api.svc.services.phoneKey)
    const loaded: SessionRecord[] = []
    await loadLiveSessions(api.svc.db.pool, cipher, recs => { loaded.push(...recs) })
    t.match(loaded.find(r => r.id === id), { proxyNumber: PA, customerProxyNumber: PB, agentPhone: A, customerPhone: B })
    t.match((await getLiveSessionState(db, id, cipher))?.rec, { proxyNumber: PA, customerProxyNumber: PB })
    const native = loaded.find(r => r.id !== id)
    t.equal(native?.customerProxyNumber, undefined, 'a native session has none')
  })

  t.test('the overlap rule on a pinned number, in memory and in the database', async t => {
    t.equal(await refusal(sessions.createPinned(acct.tenantId, { agentPhone: A, customerPhone: api.phone(3), agentProxy: PA, customerProxy: PB })),
      'proxy-in-use', 'the agent is live on PA')
    // Two creates racing for one (proxy, party), past any node's memory: the primary key decides.
    const tenant = (await api.svc.tenants.get(acct.tenantId))!
    const cipher = createPhoneCipher(api.svc.services.phoneKey)
    const args = (n: number) => {
      const r = { ...rec, id: `0190c000-0000-7000-8000-00000000010${n}`, customerPhone: api.phone(10 + n) } as SessionRecord
      return {
        rec: r, metadata: {}, agentHash: api.svc.services.hashParty(tenant.salt, api.phone(20)),
        customerHash: api.svc.services.hashParty(tenant.salt, r.customerPhone), agentEnc: cipher.encrypt(api.phone(20)), customerEnc: cipher.encrypt(r.customerPhone),
        quota: 100, events: [],
      }
    }
    const both = await Promise.all([createPinnedSession(db, args(1)), createPinnedSession(db, args(2))])
    t.same(both.sort(), ['ok', 'proxy-in-use'])
    t.equal(await db.oneFirst(sql.unsafe`SELECT live_sessions FROM proxy_numbers WHERE number = ${PA}`), 2, 'the refused one changed nothing')
  })

  t.test('native allocation never takes a bound number, even one this node has not heard of', async t => {
    const first = await db.oneFirst(sql.unsafe`
      SELECT number FROM proxy_numbers WHERE live_sessions = 0 AND bound_tenant_id IS NULL ORDER BY number LIMIT 1`) as string
    await db.query(sql.unsafe`UPDATE proxy_numbers SET bound_tenant_id = ${other.tenantId} WHERE number = ${first}`)
    const s = await api.req('POST', '/v1/sessions', { token: acct.token, body: { agentPhone: api.phone(30), customerPhone: api.phone(31) } })
    t.equal(s.status, 201)
    t.not(s.body.proxyNumber, first, 'the create\'s SQL refused it and the runner took the next')
    t.notOk([PA, PB].includes(s.body.proxyNumber))
  })

  t.test('both numbers are released when the session expires; unbinding waits for that', async t => {
    t.equal(await sessions.unbindNumber(acct.tenantId, PB), 'busy')
    for (const sid of [id, '0190c000-0000-7000-8000-000000000101', '0190c000-0000-7000-8000-000000000102']) {
      await sessions.end(acct.tenantId, sid).catch((e: unknown) => { if (!(e instanceof ApiProblem)) throw e })
      await sessions.patch(acct.tenantId, sid, { gracePeriodMinutes: 0 }).catch((e: unknown) => { if (!(e instanceof ApiProblem)) throw e })
    }
    await api.svc.expireDue()
    t.same(await db.any(sql.unsafe`SELECT number, live_sessions, tenant_id FROM proxy_numbers WHERE number IN (${PA}, ${PB}) ORDER BY number`),
      [{ number: PA, live_sessions: 0, tenant_id: null }, { number: PB, live_sessions: 0, tenant_id: null }])
    t.equal(await db.oneFirst(sql.unsafe`SELECT count(*)::int FROM session_participants WHERE proxy_number IN (${PA}, ${PB})`), 0)
    t.match(await (await driver.voice({ from: B, to: PB, callSid: 'CA-d9' })).text(), /Hangup|Reject|Say/, 'no longer routed')
    t.equal(await sessions.unbindNumber(acct.tenantId, PB), 'ok')
    t.equal(await db.oneFirst(sql.unsafe`SELECT bound_tenant_id FROM proxy_numbers WHERE number = ${PB}`), null)
  })
})
