// PATCH /v1/sessions/:id/target (contract 4.2, 3.1): idempotent, invalid-target, target-conflict,
// audit with hashes only, the previous customer unwired at once, session.target_swapped emitted.
import t from 'tap'
import { sql } from 'slonik'
import { startTestService } from '../support/service.js'

t.test('swap target', async t => {
  const api = await startTestService(t, { env: { NUMBER_POOL: 'US:+12025550100' } })
  const acct = await api.signup()
  const A = api.phone(1), B = api.phone(2), C = api.phone(3), D = api.phone(4)
  const s = (await api.req('POST', '/v1/sessions', { token: acct.token, body: { agentPhone: A, customerPhone: B } })).body
  const other = (await api.req('POST', '/v1/sessions', { token: acct.token, body: { agentPhone: D, customerPhone: C } })).body
  t.equal(other.proxyNumber, s.proxyNumber, 'one proxy carries both sessions (no shared participant)')

  const same = await api.req('PATCH', `/v1/sessions/${s.id}/target`, { token: acct.token, body: { customerPhone: B } })
  t.equal(same.status, 200, 'swapping to the current target is a no-op')
  t.same(same.body, s)

  const agent = await api.req('PATCH', `/v1/sessions/${s.id}/target`, { token: acct.token, body: { customerPhone: A } })
  t.equal(agent.status, 422)
  t.match(agent.body, { type: /\/errors\/invalid-target$/, status: 422 })

  const clash = await api.req('PATCH', `/v1/sessions/${s.id}/target`, { token: acct.token, body: { customerPhone: C } })
  t.equal(clash.status, 409, 'C already takes part in another live session on this proxy')
  t.match(clash.body, { type: /\/errors\/target-conflict$/ })

  const bad = await api.req('PATCH', `/v1/sessions/${s.id}/target`, { token: acct.token, body: { customerPhone: '12345' } })
  t.equal(bad.status, 400)

  const E = api.phone(5)
  const ok = await api.req('PATCH', `/v1/sessions/${s.id}/target`, { token: acct.token, body: { customerPhone: E } })
  t.equal(ok.status, 200)
  t.equal(ok.body.proxyNumber, s.proxyNumber, 'proxy unchanged')
  t.equal(ok.body.expiresAt, s.expiresAt, 'expiry unchanged')
  t.equal(ok.body.state, 'ACTIVE')

  // The previous customer is unwired at once; the new one routes to the agent.
  const oldCall = await api.driver.voice({ from: B, to: s.proxyNumber, callSid: 'swap-old' })
  t.match(await oldCall.text(), /<Say>[^<]*not in service[^<]*<\/Say><Hangup\/>/, 'old customer gets the expired behaviour (DEAD_LINE)')
  const newCall = await api.driver.voice({ from: E, to: s.proxyNumber, callSid: 'swap-new' })
  t.match(await newCall.text(), new RegExp(`<Number[^>]*>\\${A}</Number>`), 'new customer reaches the agent')

  const audits = await api.svc.db.pool.any(sql.unsafe`SELECT action, data FROM audit_log WHERE target_id = ${s.id}`) as readonly { action: string; data: Record<string, string> }[]
  t.equal(audits.length, 1, 'one audit entry for one effective swap')
  t.equal(audits[0]!.action, 'session.target_swapped')
  t.match(audits[0]!.data, { previousPartyBHash: /^[0-9a-f]{64}$/, newPartyBHash: /^[0-9a-f]{64}$/ })
  t.notMatch(JSON.stringify(audits), /\+\d{8}/, 'no phone number in the audit log')

  const events = await api.svc.db.pool.any(sql.unsafe`SELECT type, envelope FROM outbox WHERE session_id = ${s.id} ORDER BY id`) as readonly { type: string; envelope: { data: Record<string, unknown> } }[]
  t.same(events.map(e => e.type), ['session.created', 'session.activated', 'session.target_swapped', 'call.incoming'], 'the new customer\'s call follows the swap')
  t.match(events[2]!.envelope.data, { sessionId: s.id, tenantId: acct.tenantId, proxyNumber: s.proxyNumber, timestamp: String })

  await api.req('POST', `/v1/sessions/${s.id}/end`, { token: acct.token })
  const inGrace = await api.req('PATCH', `/v1/sessions/${s.id}/target`, { token: acct.token, body: { customerPhone: api.phone(6) } })
  t.equal(inGrace.status, 200, 'a session in GRACE_PERIOD can still be swapped')
})

// Call records carry party B's hash (the customer's), which the voice path remembers on the live
// session after its first call: after a swap, calls record the new customer's hash.
t.test('call records name the customer of the moment, before and after a swap', async t => {
  const api = await startTestService(t)
  const acct = await api.signup()
  const A = api.phone(1), B = api.phone(2), E = api.phone(5)
  const s = (await api.req('POST', '/v1/sessions', { token: acct.token, body: { agentPhone: A, customerPhone: B } })).body
  const customerHash = () => api.svc.db.pool.oneFirst(sql.unsafe`SELECT customer_hash FROM sessions WHERE id = ${s.id}`)
  const call = async (from: string, callSid: string) => t.equal((await api.driver.voice({ from, to: s.proxyNumber, callSid })).status, 200)
  await call(A, 'pb-1')
  await call(B, 'pb-2')
  await call(A, 'pb-3')
  const hashB = await customerHash()
  t.equal((await api.req('PATCH', `/v1/sessions/${s.id}/target`, { token: acct.token, body: { customerPhone: E } })).status, 200)
  await call(A, 'pb-4')
  await call(E, 'pb-5')
  const hashE = await customerHash()
  t.not(hashE, hashB)
  await api.svc.flushRecords()
  const rows = await api.svc.db.pool.any(sql.unsafe`SELECT provider_call_id AS sid, party_b_hash AS h FROM call_records WHERE session_id = ${s.id} ORDER BY provider_call_id`)
  t.same(rows, [
    { sid: 'pb-1', h: hashB }, { sid: 'pb-2', h: hashB }, { sid: 'pb-3', h: hashB },
    { sid: 'pb-4', h: hashE }, { sid: 'pb-5', h: hashE },
  ])
})
