// Voice callbacks end to end (contract 4.10, contract D5) in each provider's dialect: Telnyx (TeXML,
// Ed25519 signatures) and Twilio (TwiML, X-Twilio-Signature with the Auth Token): routing answers,
// direction modes, consent before the bridge, the status walk to COMPLETED with usage, replayed
// callbacks, expired behaviours, refused signatures.
import t from 'tap'
import { sql } from 'slonik'
import { CallbackDriver } from '../support/callback-driver.js'
import { FAKE_AUTH_TOKEN } from '../support/fake-twilio.js'
import { DIALECTS, startProviderService } from '../support/service.js'

for (const dialect of DIALECTS) t.test(`voice callbacks (${dialect})`, async t => {
  const api = await startProviderService(t, dialect)
  const { driver } = api
  const acct = await api.signup()
  const A = api.phone(1), B = api.phone(2)
  const s = (await api.req('POST', '/v1/sessions', { token: acct.token, body: { agentPhone: A, customerPhone: B, recordingEnabled: true, consentPrompt: 'DEFAULT' } })).body

  t.test('agent calls: consent, then a Dial to the customer from the proxy', async t => {
    const r = await driver.voice({ from: A, to: s.proxyNumber, callSid: 'CA-1' })
    t.equal(r.status, 200)
    t.match(r.headers.get('content-type'), /^application\/xml/)
    const xml = await r.text()
    t.match(xml, /^<\?xml version="1.0" encoding="UTF-8"\?><Response><Say>[^<]+<\/Say><Dial /)
    t.match(xml, new RegExp(`callerId="\\${s.proxyNumber}"`))
    t.match(xml, /record="record-from-answer-dual"/)
    t.match(xml, new RegExp(`<Number [^>]*>\\${B}</Number>`))
    for (const cb of ['action', 'recordingStatusCallback', 'statusCallback']) {
      t.match(xml, new RegExp(` ${cb}="http://[^"]+${driver.basePath}/voice/[a-z-]+\\?callId=[0-9a-f-]{36}"`), `${cb} goes back to the ${dialect} callbacks`)
    }
    const again = await driver.voice({ from: A, to: s.proxyNumber, callSid: 'CA-1' })
    t.equal(await again.text(), xml, 'a replayed voice fetch gets the same answer')
  })

  t.test('the call walks to COMPLETED, billed once', async t => {
    const xml = await (await driver.voice({ from: B, to: s.proxyNumber, callSid: 'CA-2' })).text()
    const callId = /callId=([0-9a-f-]{36})/.exec(xml)![1]!
    t.match(xml, new RegExp(`<Number [^>]*>\\${A}</Number>`), 'customer reaches the agent')
    t.equal((await driver.status({ callId, callSid: 'CA-2-leg', callStatus: 'in-progress' })).status, 200)
    const dial = await driver.dialStatus({ callId, callSid: 'CA-2', dialCallStatus: 'completed', dialCallDuration: 61 })
    t.equal(await dial.text(), '<?xml version="1.0" encoding="UTF-8"?><Response><Hangup/></Response>')
    await driver.dialStatus({ callId, callSid: 'CA-2', dialCallStatus: 'completed', dialCallDuration: 61 })
    await driver.recording({ callId, callSid: 'CA-2', recordingSid: 'RE-1', recordingUrl: 'https://rec.example.test/1.mp3', recordingDuration: 61 })
    await driver.recording({ callId, callSid: 'CA-2', recordingSid: 'RE-1', recordingUrl: 'https://rec.example.test/1.mp3', recordingDuration: 61 })
    const call = await api.req('GET', `/v1/calls/${callId}`, { token: acct.token })
    t.match(call.body, { id: callId, sessionId: s.id, status: 'COMPLETED', direction: 'B_TO_A', durationSeconds: 61, answeredAt: String, endedAt: String, recordingUrl: 'https://rec.example.test/1.mp3' })
    const list = await api.req('GET', `/v1/sessions/${s.id}/calls`, { token: acct.token })
    t.match(list.body.data.find((c: { id: string }) => c.id === callId), { recordingConsentPlayed: true })
    await api.svc.flushRecords() // usage is written behind the answer (group commit): no sleep, the writer's own barrier
    const usage = await api.svc.db.pool.any(sql.unsafe`SELECT metric, quantity::int AS q FROM billing_events WHERE call_record_id = ${callId} ORDER BY metric`)
    t.same(usage, [{ metric: 'call_minute', q: 2 }, { metric: 'recording_minute', q: 2 }], 'ceil(61/60) = 2 minutes, once each')
    const types = await api.svc.db.pool.anyFirst(sql.unsafe`SELECT type FROM outbox WHERE envelope->'data'->>'callId' = ${callId} ORDER BY id`)
    t.same(types, ['call.incoming', 'call.answered', 'call.ended'])
    const sess = await api.req('GET', `/v1/sessions/${s.id}`, { token: acct.token })
    t.equal(sess.body.callCount, 2, 'CA-1 and CA-2; the replays are not counted')
  })

  t.test('missed and failed calls', async t => {
    const xml1 = await (await driver.voice({ from: A, to: s.proxyNumber, callSid: 'CA-3' })).text()
    const id1 = /callId=([0-9a-f-]{36})/.exec(xml1)![1]!
    await driver.dialStatus({ callId: id1, callSid: 'CA-3', dialCallStatus: 'no-answer' })
    t.equal((await api.req('GET', `/v1/calls/${id1}`, { token: acct.token })).body.status, 'MISSED')
    const xml2 = await (await driver.voice({ from: A, to: s.proxyNumber, callSid: 'CA-4' })).text()
    const id2 = /callId=([0-9a-f-]{36})/.exec(xml2)![1]!
    await driver.status({ callId: id2, callSid: 'CA-4-leg', callStatus: 'failed' })
    t.equal((await api.req('GET', `/v1/calls/${id2}`, { token: acct.token })).body.status, 'FAILED')
    await driver.status({ callId: id2, callSid: 'CA-4-leg', callStatus: 'in-progress' })
    t.equal((await api.req('GET', `/v1/calls/${id2}`, { token: acct.token })).body.status, 'FAILED', 'never moves backwards')
  })

  t.test('direction modes, strangers, unknown proxies', async t => {
    const C = api.phone(3), D = api.phone(4)
    const oneWay = (await api.req('POST', '/v1/sessions', { token: acct.token, body: { agentPhone: C, customerPhone: D, directionMode: 'A_TO_B_ONLY' } })).body
    const r = await (await driver.voice({ from: D, to: oneWay.proxyNumber, callSid: 'CA-5' })).text()
    t.equal(r, '<?xml version="1.0" encoding="UTF-8"?><Response><Reject reason="rejected"/></Response>')
    t.match(await (await driver.voice({ from: C, to: oneWay.proxyNumber, callSid: 'CA-6' })).text(), /<Dial /)
    const stranger = await (await driver.voice({ from: api.phone(99), to: s.proxyNumber, callSid: 'CA-7' })).text()
    t.match(stranger, /<Say>[^<]*not in service[^<]*<\/Say><Hangup\/>/)
    const unknown = await (await driver.voice({ from: A, to: '+19995550100', callSid: 'CA-8' })).text()
    t.match(unknown, /<Reject/)
  })

  t.test('expired behaviour follows the tenant config', async t => {
    const cfg = await api.req('PATCH', '/v1/config', { token: acct.ownerToken, body: { expiredCallBehavior: 'REDIRECT_SUPPORT', supportPhone: '+14155550999' } })
    t.equal(cfg.status, 200)
    const x = await (await driver.voice({ from: api.phone(98), to: s.proxyNumber, callSid: 'CA-9' })).text()
    t.match(x, /<Dial callerId="[^"]+"><Number>\+14155550999<\/Number><\/Dial>/)
  })

  t.test('bad signatures are refused with an empty response', async t => {
    const r = await driver.voice({ from: A, to: s.proxyNumber, callSid: 'CA-10' }, { tamper: raw => raw.replace('CA-10', 'CA-XX') })
    t.equal(r.status, 403)
    t.equal(await r.text(), '<?xml version="1.0" encoding="UTF-8"?><Response/>')
    if (dialect === 'telnyx') {
      const stale = await driver.voice({ from: A, to: s.proxyNumber, callSid: 'CA-11' }, { timestampSeconds: Math.floor(Date.now() / 1000) - 301 })
      t.equal(stale.status, 403)
    } else {
      // Signed for another public URL than the one the service was configured with: refused.
      const elsewhere = new CallbackDriver({ baseUrl: api.url, mode: 'twilio', hmacSecret: FAKE_AUTH_TOKEN, publicBaseUrl: 'https://elsewhere.example.test' })
      t.equal((await elsewhere.voice({ from: A, to: s.proxyNumber, callSid: 'CA-11' })).status, 403)
    }
  })
})
