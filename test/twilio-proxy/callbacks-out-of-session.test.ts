// A Service's out_of_session_callback_url (docs/twilio-proxy.md, Callbacks): a call or SMS to one
// of its numbers from someone with no session there is POSTed to it, signed; an auto-create JSON
// answer creates the session (the caller on the number dialled, `participantIdentifier` the second
// participant) and the call is routed to the second participant at once; a TwiML answer is the
// call's answer; a non-2xx leaves the no-session behaviour.
import t from 'tap'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import twilio from 'twilio'
import { startTelnyxService } from '../support/service.js'
import { facadeAccount, poolNumber } from './support.js'

const CALLER = '+14155550161', AGENT = '+14155550162', OTHER = '+14155550163'

interface Answer { status: number; type: string; body: string }

async function scriptedReceiver(t: { teardown(f: () => unknown): void }) {
  const received: Array<{ params: Record<string, string>; signature: string }> = []
  const answers: Answer[] = []
  const server = http.createServer((req, res) => {
    let body = ''
    req.on('data', c => { body += c })
    req.on('end', () => {
      received.push({ params: Object.fromEntries(new URLSearchParams(body)), signature: String(req.headers['x-twilio-signature'] ?? '') })
      const a = answers.shift() ?? { status: 404, type: 'text/plain', body: 'no' }
      res.writeHead(a.status, { 'content-type': a.type }).end(a.body)
    })
  })
  await new Promise<void>(r => server.listen(0, '127.0.0.1', r))
  t.teardown(() => new Promise<void>(r => server.close(() => r())))
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/oos`, received, answers }
}

t.test('out-of-session: auto-create, TwiML, and no answer', async t => {
  const api = await startTelnyxService(t)
  const { driver } = api
  for (const p of [CALLER, AGENT, OTHER]) api.partyNumbers.add(p)
  const rx = await scriptedReceiver(t)
  const { client, authToken, accountSid } = await facadeAccount(api)
  const svc = await client.proxy.v1.services.create({ uniqueName: 'oos', outOfSessionCallbackUrl: rx.url })
  const service = client.proxy.v1.services(svc.sid)
  const dialled = poolNumber(70)
  for (const n of [dialled, poolNumber(71)]) await service.phoneNumbers.create({ phoneNumber: n })

  // a non-2xx answer: the number's no-session behaviour, nothing created
  rx.answers.push({ status: 500, type: 'application/json', body: '{}' })
  t.notMatch(await (await driver.voice({ from: CALLER, to: dialled, callSid: 'CA-o1' })).text(), /<\/Number>/)
  t.equal((await service.sessions.list()).length, 0)
  t.match(rx.received[0]!.params, {
    inboundParticipantIdentifier: CALLER, inboundParticipantProxyIdentifier: dialled, AccountSid: accountSid, CallSid: 'CA-o1',
    From: CALLER, To: dialled, CallStatus: 'ringing', Direction: 'inbound', inboundParticipantServiceSid: svc.sid,
  })
  t.ok(twilio.validateRequest(authToken, rx.received[0]!.signature, rx.url, rx.received[0]!.params), 'signed with the auth token')
  t.notOk(twilio.validateRequest('1'.repeat(32), rx.received[0]!.signature, rx.url, rx.received[0]!.params))

  // TwiML: the call's answer
  rx.answers.push({ status: 200, type: 'application/xml', body: '<Response><Say>Closed</Say></Response>' })
  t.equal(await (await driver.voice({ from: CALLER, to: dialled, callSid: 'CA-o2' })).text(), '<Response><Say>Closed</Say></Response>')

  // auto-create: the session, then the call routed to the agent
  rx.answers.push({ status: 200, type: 'application/json', body: JSON.stringify({ uniqueName: 'auto-1', ttl: 3600, mode: 'voice-and-message', participantIdentifier: AGENT }) })
  const routed = await (await driver.voice({ from: CALLER, to: dialled, callSid: 'CA-o3' })).text()
  t.match(routed, new RegExp(`>\\${AGENT}</Number>`), 'the call reaches the second participant')
  const [s] = await service.sessions.list()
  t.match(s, { uniqueName: 'auto-1', ttl: 3600, mode: 'voice-and-message' })
  const parts = await service.sessions(s!.sid).participants.list()
  t.same(parts.map(p => p.identifier).sort(), [CALLER, AGENT])
  t.equal(parts.find(p => p.identifier === CALLER)!.proxyIdentifier, dialled, 'the caller stays on the number they dialled')
  t.equal(rx.received.length, 3)

  // the session exists now: no callback, straight through
  t.match(await (await driver.voice({ from: CALLER, to: dialled, callSid: 'CA-o4' })).text(), new RegExp(`>\\${AGENT}</Number>`))
  t.equal(rx.received.length, 3)

  // an SMS from someone else: auto-created and forwarded
  rx.answers.push({ status: 200, type: 'application/json; charset=utf-8', body: JSON.stringify({ participantIdentifier: AGENT, participantProxyIdentifier: poolNumber(71) }) })
  const before = api.fake.count
  t.same(await (await driver.smsReceived({ from: OTHER, to: poolNumber(71), text: 'hi there', messageId: 'o-sms-1' })).json(), { ok: true })
  t.equal(api.fake.count, before + 1, 'the SMS is forwarded')
  t.notOk('Body' in rx.received[3]!.params, 'never the text')
  t.equal((await service.sessions.list()).length, 2)
})
