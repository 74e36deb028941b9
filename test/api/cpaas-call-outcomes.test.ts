// Calls walked from the voice fetch to their end through the real HTTP service (contract 4.10,
// contract D5), in each provider's dialect (TeXML for Telnyx, TwiML for Twilio), with the callbacks they send: the Number statusCallback and the Dial
// action (both `?callId=`), and the TeXML application's own status callback for the parent call
// (no callId). Each outcome is read back through GET /v1/calls/:id, its events from the
// outbox and its usage from billing_events. Callbacks also arrive out of order.
import t from 'tap'
import { sql } from 'slonik'
import { DIALECTS, eventually, startProviderService } from '../support/service.js'

for (const dialect of DIALECTS) t.test(`call outcomes (${dialect})`, async t => {
  const api = await startProviderService(t, dialect)
  const { driver } = api
  const pool = api.svc.db.pool
  const acct = await api.signup()
  const cfg = await api.req('PATCH', '/v1/config', { token: acct.ownerToken, body: { recordingEnabled: true, recordingConsentMode: 'DEFAULT' } })
  t.equal(cfg.status, 200)
  const A = api.phone(1), B = api.phone(2)
  const s = (await api.req('POST', '/v1/sessions', { token: acct.token, body: { agentPhone: A, customerPhone: B } })).body
  t.equal(s.recordingEnabled, true, 'the session takes the tenant default')

  let n = 0
  /** The inbound call: the voice fetch, answered with consent + Dial. */
  async function inbound(from: string) {
    const callSid = `v3:outcome-${++n}`
    const xml = await (await driver.voice({ from, to: s.proxyNumber, callSid })).text()
    const callId = /callId=([0-9a-f-]{36})/.exec(xml)?.[1]
    if (!callId) throw new Error(`no Dial in ${xml}`)
    return { callSid, callId, xml }
  }
  const call = async (id: string) => (await api.req('GET', `/v1/calls/${id}`, { token: acct.token })).body
  const eventsOf = (id: string) => pool.anyFirst(sql.unsafe`SELECT type FROM outbox WHERE envelope->'data'->>'callId' = ${id} ORDER BY id`) as Promise<readonly string[]>
  /** Events are written behind the answer; a call's events and usage land in one transaction. */
  const settledEvents = (id: string, count: number) =>
    eventually(async () => { const e = await eventsOf(id); return e.length >= count ? e : undefined }, `${count} events of call ${id}`)
  const usageOf = (id: string) => pool.any(sql.unsafe`SELECT metric, quantity::int AS q FROM billing_events WHERE call_record_id = ${id} ORDER BY metric`)
  const endedData = async (id: string) =>
    (await pool.oneFirst(sql.unsafe`SELECT envelope->'data' FROM outbox WHERE envelope->'data'->>'callId' = ${id} AND type IN ('call.ended', 'call.failed')`)) as Record<string, unknown>
  const done: Array<{ id: string; events: string[] }> = []

  t.test('answered → completed, with every callback a provider sends', async t => {
    const c = await inbound(B)
    t.match(c.xml, /<Response><Say>[^<]+<\/Say><Dial [^>]*record="record-from-answer-dual"/, 'consent before the bridge')
    const leg = `${c.callSid}-leg`
    t.equal((await driver.parentStatus({ callSid: c.callSid, callStatus: 'in-progress' })).status, 200)
    t.match(await call(c.callId), { status: 'RINGING', answeredAt: null }, 'the application answering for the prompt is no answer')
    await driver.status({ callId: c.callId, callSid: leg, callStatus: 'initiated', parentCallSid: c.callSid })
    await driver.status({ callId: c.callId, callSid: leg, callStatus: 'ringing', parentCallSid: c.callSid })
    await driver.status({ callId: c.callId, callSid: leg, callStatus: 'in-progress', parentCallSid: c.callSid })
    t.match(await call(c.callId), { status: 'ANSWERED', answeredAt: String, endedAt: null })
    await driver.status({ callId: c.callId, callSid: leg, callStatus: 'completed', callDuration: 75, parentCallSid: c.callSid })
    await driver.dialStatus({ callId: c.callId, callSid: c.callSid, dialCallStatus: 'completed', dialCallSid: leg, dialCallDuration: 75 })
    t.equal((await driver.parentStatus({ callSid: c.callSid, callStatus: 'completed', callDuration: 90 })).status, 200)
    t.match(await call(c.callId), { id: c.callId, sessionId: s.id, status: 'COMPLETED', direction: 'B_TO_A', durationSeconds: 75, answeredAt: String, endedAt: String })
    t.same(await settledEvents(c.callId, 3), ['call.incoming', 'call.answered', 'call.ended'])
    t.match(await endedData(c.callId), { status: 'COMPLETED', durationSeconds: 75 })
    t.same(await usageOf(c.callId), [{ metric: 'call_minute', q: 2 }], 'the bridge is billed, not the parent duration')
    done.push({ id: c.callId, events: ['call.incoming', 'call.answered', 'call.ended'] })
  })

  for (const outcome of ['busy', 'no-answer'] as const) {
    t.test(`${outcome}: MISSED`, async t => {
      const c = await inbound(A)
      const leg = `${c.callSid}-leg`
      await driver.status({ callId: c.callId, callSid: leg, callStatus: 'initiated' })
      await driver.status({ callId: c.callId, callSid: leg, callStatus: 'ringing' })
      await driver.status({ callId: c.callId, callSid: leg, callStatus: outcome })
      await driver.dialStatus({ callId: c.callId, callSid: c.callSid, dialCallStatus: outcome, dialCallSid: leg })
      await driver.parentStatus({ callSid: c.callSid, callStatus: 'completed', callDuration: 25 })
      t.match(await call(c.callId), { status: 'MISSED', direction: 'A_TO_B', durationSeconds: 0, answeredAt: null, endedAt: String })
      t.same(await settledEvents(c.callId, 2), ['call.incoming', 'call.ended'])
      t.match(await endedData(c.callId), { status: 'MISSED', durationSeconds: 0 })
      t.same(await usageOf(c.callId), [])
      done.push({ id: c.callId, events: ['call.incoming', 'call.ended'] })
    })
  }

  t.test('failed: FAILED with call.failed', async t => {
    const c = await inbound(A)
    await driver.status({ callId: c.callId, callSid: `${c.callSid}-leg`, callStatus: 'failed' })
    await driver.dialStatus({ callId: c.callId, callSid: c.callSid, dialCallStatus: 'failed' })
    await driver.parentStatus({ callSid: c.callSid, callStatus: 'completed' })
    t.match(await call(c.callId), { status: 'FAILED', durationSeconds: 0, answeredAt: null, endedAt: String })
    t.same(await settledEvents(c.callId, 2), ['call.incoming', 'call.failed'])
    t.same(await usageOf(c.callId), [])
    done.push({ id: c.callId, events: ['call.incoming', 'call.failed'] })
  })

  t.test('the caller hangs up during the consent prompt: only the parent reports, the call is MISSED', async t => {
    const c = await inbound(B)
    t.match(c.xml, /<Response><Say>[^<]+<\/Say><Dial /)
    // The record is written behind the TeXML answer.
    t.match(await eventually(async () => { const x = await call(c.callId); return x.id ? x : undefined }, 'the call record'), { status: 'RINGING' })
    // The Dial never started: no Number statusCallback, no Dial action; the application's own
    // status callback reports the parent by the CallSid of the voice fetch, without a callId.
    const r = await driver.parentStatus({ callSid: c.callSid, callStatus: 'completed', callDuration: 4 })
    t.equal(r.status, 200)
    t.equal(await r.text(), '')
    t.match(await call(c.callId), { status: 'MISSED', durationSeconds: 0, answeredAt: null, endedAt: String })
    const list = await api.req('GET', `/v1/sessions/${s.id}/calls`, { token: acct.token })
    t.match(list.body.data.find((x: { id: string }) => x.id === c.callId), { status: 'MISSED', recordingConsentPlayed: true })
    t.same(await settledEvents(c.callId, 2), ['call.incoming', 'call.ended'])
    t.match(await endedData(c.callId), { sessionId: s.id, callId: c.callId, status: 'MISSED', durationSeconds: 0 })
    t.same(await usageOf(c.callId), [], 'no call_minute')
    t.equal((await driver.parentStatus({ callSid: c.callSid, callStatus: 'completed', callDuration: 4 })).status, 200, 'a replay is answered')
    done.push({ id: c.callId, events: ['call.incoming', 'call.ended'] })
  })

  t.test('parent callbacks that match nothing', async t => {
    const before = await pool.oneFirst(sql.unsafe`SELECT count(*)::int FROM call_records`)
    const unknown = await driver.parentStatus({ callSid: 'v3:never-fetched', callStatus: 'completed' })
    t.equal(unknown.status, 200, 'unknown CallSid: 200, so the provider does not retry')
    t.equal(await pool.oneFirst(sql.unsafe`SELECT count(*)::int FROM call_records`), before)
    const noSid = await driver.postForm('/voice/status', { CallStatus: 'completed' })
    t.equal(noSid.status, 400, 'neither a callId nor a CallSid')
    const noCallIdOnDial = await driver.postForm('/voice/dial-status', { CallSid: 'v3:outcome-1', DialCallStatus: 'completed' })
    t.equal(noCallIdOnDial.status, 400, 'the Dial action always carries its callId')
  })

  t.test('out of order: completed before in-progress', async t => {
    const c = await inbound(B)
    const leg = `${c.callSid}-leg`
    await driver.status({ callId: c.callId, callSid: leg, callStatus: 'completed' })
    t.match(await call(c.callId), { status: 'RINGING' }, 'a completed without answer or duration waits for the Dial action')
    await driver.status({ callId: c.callId, callSid: leg, callStatus: 'in-progress' })
    t.match(await call(c.callId), { status: 'ANSWERED' })
    await driver.dialStatus({ callId: c.callId, callSid: c.callSid, dialCallStatus: 'completed', dialCallDuration: 42 })
    await driver.parentStatus({ callSid: c.callSid, callStatus: 'completed', callDuration: 50 })
    t.match(await call(c.callId), { status: 'COMPLETED', durationSeconds: 42, answeredAt: String, endedAt: String })
    t.same(await settledEvents(c.callId, 3), ['call.incoming', 'call.answered', 'call.ended'])
    t.same(await usageOf(c.callId), [{ metric: 'call_minute', q: 1 }])
    done.push({ id: c.callId, events: ['call.incoming', 'call.answered', 'call.ended'] })
  })

  t.test('out of order: the Dial action before the status callbacks', async t => {
    const c = await inbound(A)
    const leg = `${c.callSid}-leg`
    await driver.dialStatus({ callId: c.callId, callSid: c.callSid, dialCallStatus: 'completed', dialCallDuration: 130 })
    t.match(await call(c.callId), { status: 'COMPLETED', durationSeconds: 130 })
    await driver.status({ callId: c.callId, callSid: leg, callStatus: 'in-progress' })
    await driver.status({ callId: c.callId, callSid: leg, callStatus: 'completed', callDuration: 125 })
    await driver.parentStatus({ callSid: c.callSid, callStatus: 'completed', callDuration: 140 })
    t.match(await call(c.callId), { status: 'COMPLETED', durationSeconds: 130 }, 'late callbacks change nothing')
    t.same(await settledEvents(c.callId, 2), ['call.incoming', 'call.ended'])
    t.same(await usageOf(c.callId), [{ metric: 'call_minute', q: 3 }])
    done.push({ id: c.callId, events: ['call.incoming', 'call.ended'] })
  })

  t.test('out of order: the caller hangs up a bridged call, the parent reports before the Dial action', async t => {
    const c = await inbound(B)
    await driver.status({ callId: c.callId, callSid: `${c.callSid}-leg`, callStatus: 'in-progress' })
    await driver.parentStatus({ callSid: c.callSid, callStatus: 'completed', callDuration: 70 })
    t.match(await call(c.callId), { status: 'ANSWERED' }, 'an answered call is not missed, and the parent duration is not the bridge')
    await driver.dialStatus({ callId: c.callId, callSid: c.callSid, dialCallStatus: 'completed', dialCallDuration: 61 })
    t.match(await call(c.callId), { status: 'COMPLETED', durationSeconds: 61 })
    t.same(await settledEvents(c.callId, 3), ['call.incoming', 'call.answered', 'call.ended'])
    t.same(await usageOf(c.callId), [{ metric: 'call_minute', q: 2 }])
    done.push({ id: c.callId, events: ['call.incoming', 'call.answered', 'call.ended'] })
  })

  t.test('replays and late callbacks emitted nothing more', async t => {
    // Event batches are written in order: once the last call's events are in, every earlier
    // callback's events would be too.
    for (const d of done) t.same(await eventsOf(d.id), d.events, `call ${d.id}`)
    t.equal(done.length, 8)
  })
})
