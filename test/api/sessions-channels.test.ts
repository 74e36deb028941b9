// contract D10: `channels` on POST /v1/sessions, end to end through the real service, the
// real telnyx SDK against a fake Telnyx and signed callbacks.
// - Default both; shown in the session wherever the contract returns it (create, memory read, list).
// - Bad values (empty, repeated, unknown) are 400 validation and create nothing.
// - A call on an SMS-only session: <Reject reason="rejected"/>, recorded FAILED (call.incoming,
//   call.failed), as a call against the direction mode (contract D5).
// - An SMS on a voice-only session: acknowledged, not forwarded, recorded FAILED with reason
//   `channel` and reported by sms.blocked (reason `channel`); no usage; a provider retry of the
//   same message changes nothing twice.
import t from 'tap'
import { sql } from 'slonik'
import { eventually, startTelnyxService } from '../support/service.js'

const XML_REJECT = '<?xml version="1.0" encoding="UTF-8"?><Response><Reject reason="rejected"/></Response>'

t.test('channels', async t => {
  const api = await startTelnyxService(t)
  const { driver, fake } = api
  const pool = api.svc.db.pool
  const acct = await api.signup()
  let parties = 0
  const create = (body: Record<string, unknown>) => {
    const agent = api.phone(++parties), customer = api.phone(++parties)
    return api.req('POST', '/v1/sessions', { token: acct.token, body: { agentPhone: agent, customerPhone: customer, ...body } })
      .then(r => ({ r, agent, customer }))
  }
  const landed = (table: 'sms_records' | 'call_records', sessionId: string, status: string, what: string) =>
    eventually(async () => {
      const id = await pool.maybeOneFirst(sql.unsafe`SELECT id FROM ${sql.identifier([table])} WHERE session_id = ${sessionId} AND status = ${status} LIMIT 1`)
      return (id as string | null) ?? undefined
    }, what)
  const events = (sessionId: string, prefix: string) =>
    pool.any(sql.unsafe`SELECT type, envelope->'data' AS data FROM outbox WHERE session_id = ${sessionId} AND type LIKE ${prefix + '%'} ORDER BY id`)

  t.test('default both, shown with the session; bad values refused', async t => {
    const { r } = await create({})
    t.equal(r.status, 201)
    t.same(r.body.channels, ['voice', 'sms'])
    t.equal(r.body.inactivityTimeoutMinutes, null)
    const { r: one } = await create({ channels: ['sms'] })
    t.equal(one.status, 201)
    t.same(one.body.channels, ['sms'])
    t.same((await api.req('GET', `/v1/sessions/${one.body.id}`, { token: acct.token })).body.channels, ['sms'], 'from memory')
    const list = await api.req('GET', '/v1/sessions', { token: acct.token })
    t.same(list.body.data.map((s: { id: string; channels: string[] }) => [s.id, s.channels]),
      [[one.body.id, ['sms']], [r.body.id, ['voice', 'sms']]], 'from Postgres')

    const before = list.body.data.length
    for (const channels of [[], ['voice', 'voice'], ['fax'], 'voice', ['voice', 'sms', 'sms']]) {
      const { r: bad } = await create({ channels })
      t.equal(bad.status, 400, JSON.stringify(channels))
      t.match(bad.headers.get('content-type'), /^application\/problem\+json/)
      t.match(bad.body, { type: /\/errors\/validation$/, status: 400, errors: [{ field: String }] })
    }
    t.equal((await api.req('GET', '/v1/sessions', { token: acct.token })).body.data.length, before, 'nothing created')
  })

  t.test('a call on an SMS-only session is rejected and recorded FAILED; its SMS flow', async t => {
    const { r, agent, customer } = await create({ channels: ['sms'] })
    const s = r.body as { id: string; proxyNumber: string }
    const callSid = 'v3:sms-only-call'
    const res = await driver.voice({ from: customer, to: s.proxyNumber, callSid })
    t.equal(res.status, 200)
    t.equal(await res.text(), XML_REJECT)
    const callId = await landed('call_records', s.id, 'FAILED', 'the rejected call record')
    const base = { sessionId: s.id, tenantId: acct.tenantId, proxyNumber: s.proxyNumber, callId, direction: 'B_TO_A', durationSeconds: 0 }
    t.match(await eventually(async () => { const e = await events(s.id, 'call.'); return e.length >= 2 ? e : undefined }, 'call events'),
      [{ type: 'call.incoming', data: { ...base, status: 'RINGING' } }, { type: 'call.failed', data: { ...base, status: 'FAILED' } }])
    const calls = (await api.req('GET', `/v1/sessions/${s.id}/calls`, { token: acct.token })).body.data
    t.match(calls, [{ id: callId, status: 'FAILED', direction: 'B_TO_A' }])

    const before = fake.count
    t.equal(await (await driver.smsReceived({ from: agent, to: s.proxyNumber, text: 'sms is fine here', messageId: 'sms-only-1' })).text(), '{"ok":true}')
    await landed('sms_records', s.id, 'SENT', 'the SMS forwarded')
    t.equal(fake.count, before + 1, 'SMS still forwarded')
  })

  t.test('an SMS on a voice-only session is blocked: recorded FAILED (reason channel), sms.blocked', async t => {
    const { r, agent, customer } = await create({ channels: ['voice'] })
    const s = r.body as { id: string; proxyNumber: string }
    const text = 'not for a voice-only session'
    const before = fake.count
    const res = await driver.smsReceived({ from: customer, to: s.proxyNumber, text, messageId: 'voice-only-1' })
    t.equal(res.status, 200)
    t.equal(await res.text(), '{"ok":true}', 'acknowledged: the provider must not retry')
    const smsId = await landed('sms_records', s.id, 'FAILED', 'the blocked record')
    t.equal((await driver.smsReceived({ from: customer, to: s.proxyNumber, text, messageId: 'voice-only-1' })).status, 200, 'a retry')

    // A call still gets through, and lands after everything above.
    const xml = await (await driver.voice({ from: agent, to: s.proxyNumber, callSid: 'v3:voice-only-call' })).text()
    t.match(xml, /<Dial /)
    await landed('call_records', s.id, 'RINGING', 'the call record')

    t.equal(fake.count, before, 'nothing reached the provider')
    t.notOk(fake.requests.some(q => JSON.stringify(q.body).includes(text)))
    const list = (await api.req('GET', `/v1/sessions/${s.id}/sms`, { token: acct.token })).body.data
    t.match(list, [{ id: smsId, sessionId: s.id, direction: 'B_TO_A', status: 'FAILED', deliveredAt: null, reason: 'channel' }], 'one record, the retry added none')
    t.same(await events(s.id, 'sms.'), [{
      type: 'sms.blocked',
      data: { sessionId: s.id, tenantId: acct.tenantId, proxyNumber: s.proxyNumber, direction: 'B_TO_A', smsId, status: 'FAILED', reason: 'channel' },
    }], 'one sms.blocked, no sms.received or sms.sent')
    t.same(await pool.anyFirst(sql.unsafe`SELECT metric FROM billing_events WHERE session_id = ${s.id} AND metric LIKE 'sms%'`), [], 'no SMS usage')
    t.notOk(api.logLines.some(l => l.includes(text)), 'no log line carries the text')

    // Carrier keywords are heard on a voice-only session too: STOP opts the sender out (its one
    // confirmation goes back from the proxy), it is not recorded as blocked.
    const stop = await driver.smsReceived({ from: customer, to: s.proxyNumber, text: 'STOP', messageId: 'voice-only-stop' })
    t.equal(stop.status, 200)
    t.equal(fake.count, before + 1, 'the confirmation was sent')
    t.match(fake.requests.at(-1)!.body, { from: s.proxyNumber, to: customer })
    await api.svc.flushRecords()
    t.equal(await pool.oneFirst(sql.unsafe`SELECT count(*)::int FROM sms_records WHERE provider_message_id = 'voice-only-stop'`), 0, 'no blocked record for the keyword')
    t.equal(await pool.oneFirst(sql.unsafe`SELECT count(*)::int FROM sms_opt_outs WHERE tenant_id = ${acct.tenantId} AND proxy = ${s.proxyNumber} AND opted_out`), 1, 'opted out')
  })
})
