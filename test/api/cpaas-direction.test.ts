// Direction modes end to end (contract 2 "Direction mode", contract D5) through the real HTTP service,
// the real telnyx SDK against a fake Telnyx, and Ed25519-signed callbacks. A_TO_B_ONLY lets only
// the agent (A) reach the customer (B); B_TO_A_ONLY only B reach A.
// - SMS from the side that may not send: dropped. Answered 200 {"ok":true} like any SMS, nothing
//   sent to the provider, no sms record, no event, no usage. The other side is forwarded.
// - A call from that side: answered <Reject reason="rejected"/>, recorded as a FAILED call, with
//   call.incoming (the fetch, RINGING) then call.failed in the outbox, and no usage.
// Writes land behind the answer (group commit, in order), so each "nothing happened" is checked
// after a later, allowed message or call has landed: a wrong write would be in by then.
import t from 'tap'
import { sql } from 'slonik'
import { eventually, startTelnyxService } from '../support/service.js'

const XML_REJECT = '<?xml version="1.0" encoding="UTF-8"?><Response><Reject reason="rejected"/></Response>'

const MODES = [
  // The side that may not send, named by its role, and the direction its attempt would have had.
  { mode: 'A_TO_B_ONLY', denied: 'customer', deniedDirection: 'B_TO_A', allowedDirection: 'A_TO_B' },
  { mode: 'B_TO_A_ONLY', denied: 'agent', deniedDirection: 'A_TO_B', allowedDirection: 'B_TO_A' },
] as const

t.test('direction modes', async t => {
  const api = await startTelnyxService(t)
  const { driver, fake } = api
  const pool = api.svc.db.pool
  const acct = await api.signup()
  let parties = 0

  async function oneWaySession(directionMode: string) {
    const agent = api.phone(++parties), customer = api.phone(++parties)
    const r = await api.req('POST', '/v1/sessions', { token: acct.token, body: { agentPhone: agent, customerPhone: customer, directionMode } })
    t.equal(r.status, 201)
    t.equal(r.body.directionMode, directionMode)
    return { id: r.body.id as string, proxy: r.body.proxyNumber as string, agent, customer }
  }
  /** Read once a write has landed: polling the API would spend the tenant's rate limit. */
  async function list<T>(path: string): Promise<T[]> {
    const r = await api.req('GET', path, { token: acct.token })
    if (r.status !== 200) throw new Error(`GET ${path}: ${r.status}`)
    return r.body.data as T[]
  }
  const smsList = (sessionId: string) => list<{ id: string; direction: string; status: string }>(`/v1/sessions/${sessionId}/sms`)
  const callList = (sessionId: string) => list<Record<string, unknown> & { id: string }>(`/v1/sessions/${sessionId}/calls`)
  /** Polls Postgres (not rate-limited) until the session has a record with this status; its id. */
  const landed = (table: 'sms_records' | 'call_records', sessionId: string, status: string, what: string) =>
    eventually(async () => {
      const id = await pool.maybeOneFirst(sql.unsafe`SELECT id FROM ${sql.identifier([table])} WHERE session_id = ${sessionId} AND status = ${status} LIMIT 1`)
      return (id as string | null) ?? undefined
    }, what)
  const eventTypes = (sessionId: string, prefix: string) =>
    pool.anyFirst(sql.unsafe`SELECT type FROM outbox WHERE session_id = ${sessionId} AND type LIKE ${prefix + '%'} ORDER BY id`) as Promise<readonly string[]>
  const settledEventTypes = (sessionId: string, prefix: string, count: number) =>
    eventually(async () => { const e = await eventTypes(sessionId, prefix); return e.length >= count ? e : undefined }, `${count} ${prefix} events`)
  const usage = (sessionId: string) =>
    pool.anyFirst(sql.unsafe`SELECT metric FROM billing_events WHERE session_id = ${sessionId} AND metric IN ('sms_received', 'sms_sent', 'call_minute', 'recording_minute') ORDER BY metric`) as Promise<readonly string[]>

  for (const m of MODES) {
    t.test(`${m.mode}: an SMS from the ${m.denied} is dropped, the other side's is forwarded`, async t => {
      const s = await oneWaySession(m.mode)
      const [from, to] = m.denied === 'customer' ? [s.customer, s.agent] : [s.agent, s.customer]
      const deniedText = `not to be forwarded ${m.mode}`
      const allowedText = `forward me ${m.mode}`
      const before = fake.count

      const denied = await driver.smsReceived({ from, to: s.proxy, text: deniedText, messageId: `deny-${m.mode}` })
      t.equal(denied.status, 200)
      t.match(denied.headers.get('content-type'), /^application\/json/)
      t.equal(await denied.text(), '{"ok":true}', 'acknowledged like any SMS, so the provider does not retry')

      const allowed = await driver.smsReceived({ from: to, to: s.proxy, text: allowedText, messageId: `allow-${m.mode}` })
      t.equal(await allowed.text(), '{"ok":true}')
      const rowId = await landed('sms_records', s.id, 'SENT', 'the allowed SMS forwarded')

      t.equal(fake.count, before + 1, 'one message reached the provider')
      t.match(fake.requests.at(-1)!.body, { from: s.proxy, to: from, text: allowedText }, 'the allowed one, from the proxy to the other side')
      t.notOk(fake.requests.some(q => JSON.stringify(q.body).includes(deniedText)), 'the dropped text never reached the provider')
      t.same((await smsList(s.id)).map(r => [r.id, r.direction]), [[rowId, m.allowedDirection]], 'one sms record: the allowed one')
      t.equal(await pool.oneFirst(sql.unsafe`SELECT count(*)::int FROM sms_records WHERE provider_message_id = ${`deny-${m.mode}`}`), 0, 'no record of the dropped message')
      t.same(await settledEventTypes(s.id, 'sms.', 2), ['sms.received', 'sms.sent'], 'events of the allowed message only')
      t.same(await usage(s.id), ['sms_received', 'sms_sent'], 'usage of the allowed message only')
      t.notOk(api.logLines.some(l => l.includes(deniedText) || l.includes(allowedText)), 'no log line carries a text')
    })

    t.test(`${m.mode}: a call from the ${m.denied} is rejected and recorded FAILED`, async t => {
      const s = await oneWaySession(m.mode)
      const [from, to] = m.denied === 'customer' ? [s.customer, s.agent] : [s.agent, s.customer]
      const callSid = `v3:deny-${m.mode}`

      const r = await driver.voice({ from, to: s.proxy, callSid })
      t.equal(r.status, 200)
      t.match(r.headers.get('content-type'), /^application\/xml/)
      t.equal(await r.text(), XML_REJECT)
      t.equal(await (await driver.voice({ from, to: s.proxy, callSid })).text(), XML_REJECT, 'a replayed fetch gets the same answer')

      await landed('call_records', s.id, 'FAILED', 'the rejected call record')
      const [rejected, ...others] = await callList(s.id)
      if (rejected === undefined) throw new Error('no call record')
      t.same(others, [], 'one record')
      t.match(rejected, { sessionId: s.id, status: 'FAILED', direction: m.deniedDirection, durationSeconds: 0, answeredAt: null, endedAt: String, recordingUrl: null })
      t.match((await api.req('GET', `/v1/calls/${rejected.id}`, { token: acct.token })).body, { id: rejected.id, status: 'FAILED', direction: m.deniedDirection })
      t.same(await settledEventTypes(s.id, 'call.', 2), ['call.incoming', 'call.failed'])
      const data = await pool.any(sql.unsafe`SELECT type, envelope->'data' AS data FROM outbox WHERE session_id = ${s.id} AND type LIKE 'call.%' ORDER BY id`)
      const base = { sessionId: s.id, tenantId: acct.tenantId, proxyNumber: s.proxy, callId: rejected.id, direction: m.deniedDirection, durationSeconds: 0 }
      t.match(data, [{ type: 'call.incoming', data: { ...base, status: 'RINGING' } }, { type: 'call.failed', data: { ...base, status: 'FAILED' } }])

      // The provider reports the rejected call's end: it stays FAILED, nothing more is emitted.
      t.equal((await driver.parentStatus({ callSid, callStatus: 'failed' })).status, 200)
      t.equal((await driver.parentStatus({ callSid, callStatus: 'completed' })).status, 200)

      // The other side still gets through; its record and event land after everything above.
      const xml = await (await driver.voice({ from: to, to: s.proxy, callSid: `v3:allow-${m.mode}` })).text()
      t.match(xml, new RegExp(`<Dial [^>]*><Number [^>]*>\\${from}</Number></Dial>`), 'the allowed side is bridged')
      const allowedId = /callId=([0-9a-f-]{36})/.exec(xml)![1]!
      t.same(await settledEventTypes(s.id, 'call.', 3), ['call.incoming', 'call.failed', 'call.incoming'])
      const calls = await callList(s.id)
      t.same(calls.map(c => [c.id, c.status, c.direction]).sort(), [[rejected.id, 'FAILED', m.deniedDirection], [allowedId, 'RINGING', m.allowedDirection]].sort(),
        'one record per call: the replay added none, the late callbacks changed nothing')
      t.same(await usage(s.id), [], 'a rejected call is not billed')
    })
  }
})
