// A Service's intercept_callback_url (docs/twilio-proxy.md, Callbacks): before a call or SMS of a
// façade session is proxied, its Interaction (no outbound leg) is POSTed there, signed; 403 blocks
// it (the call is rejected, the SMS not forwarded), 200 lets it through, and so does no answer
// within TWILIO_PROXY_INTERCEPT_TIMEOUT_MS. In either provider's callback dialect.
import t from 'tap'
import twilio from 'twilio'
import { DIALECTS, startProviderService } from '../support/service.js'
import { startWebhookReceiver } from '../support/webhook-receiver.js'
import { facadeAccount, poolNumber } from './support.js'

const A = '+14155550151', B = '+14155550152'

for (const dialect of DIALECTS) t.test(`intercept_callback_url blocks on 403, lets through otherwise (${dialect} callbacks)`, async t => {
  const api = await startProviderService(t, dialect, { env: { TWILIO_PROXY_INTERCEPT_TIMEOUT_MS: '300' } })
  const { driver, fake } = api
  for (const p of [A, B]) api.partyNumbers.add(p)
  const receiver = await startWebhookReceiver()
  t.teardown(() => receiver.close())
  const { client, authToken } = await facadeAccount(api)
  const svc = await client.proxy.v1.services.create({ uniqueName: 'intercept', interceptCallbackUrl: receiver.url })
  const service = client.proxy.v1.services(svc.sid)
  for (const n of [poolNumber(60), poolNumber(61)]) await service.phoneNumbers.create({ phoneNumber: n })
  const s = await service.sessions.create({ participants: [{ Identifier: A }, { Identifier: B }] })
  const [pa, pb] = await service.sessions(s.sid).participants.list()
  const pA = pa!.proxyIdentifier, pB = pb!.proxyIdentifier

  receiver.script({ status: 403 }, 2)
  const blocked = await (await driver.voice({ from: A, to: pA, callSid: 'CA-i1' })).text()
  t.match(blocked, /<Reject/, 'a 403 rejects the call')
  t.notMatch(blocked, /<\/Number>/)
  const before = fake.count
  t.equal((await driver.smsReceived({ from: B, to: pB, text: 'hello', messageId: 'i-sms-1' })).status, 200)
  t.equal(fake.count, before, 'a 403 keeps the SMS from being forwarded')
  t.equal(receiver.deliveries.length, 2)

  const [call, sms] = receiver.deliveries.map(d => ({ d, p: Object.fromEntries(new URLSearchParams(d.body)) }))
  for (const { d, p } of [call!, sms!]) {
    t.ok(twilio.validateRequest(authToken, d.headers['x-twilio-signature'] as string, receiver.url, p), 'signed with the auth token')
    t.notOk(Object.keys(p).some(k => k.startsWith('outbound')), 'no outbound leg yet')
    t.notMatch(d.body, /4155550|hello/)
  }
  t.match(call!.p, { interactionSessionSid: s.sid, interactionType: 'Voice', inboundParticipantSid: pa!.sid, inboundResourceType: 'Call' })
  t.match(sms!.p, { interactionSessionSid: s.sid, interactionType: 'Message', inboundParticipantSid: pb!.sid })

  const through = await (await driver.voice({ from: A, to: pA, callSid: 'CA-i2' })).text()
  t.match(through, new RegExp(`>\\${B}</Number>`), 'a 200 lets the call through')
  t.equal((await driver.smsReceived({ from: B, to: pB, text: 'hello', messageId: 'i-sms-2' })).status, 200)
  t.equal(fake.count, before + 1, 'and the SMS')

  receiver.script('hang')
  const late = await (await driver.voice({ from: B, to: pB, callSid: 'CA-i3' })).text()
  t.match(late, new RegExp(`>\\${A}</Number>`), 'no answer within the bound lets it through')

  // a Service without the URL: no callback at all
  await service.update({ interceptCallbackUrl: '' })
  const n = receiver.deliveries.length
  t.match(await (await driver.voice({ from: A, to: pA, callSid: 'CA-i4' })).text(), /<\/Number>/)
  t.equal(receiver.deliveries.length, n)
})
