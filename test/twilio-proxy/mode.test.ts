// A façade session's Mode (docs/twilio-proxy.md) decides what it carries: a call into a
// `message-only` session is not connected (and its texts are), an SMS into a `voice-only` session
// is not forwarded (and its calls are). Driven by the real `twilio` SDK and the provider's signed
// callbacks.
import t from 'tap'
import { startTelnyxService } from '../support/service.js'
import { facadeAccount, poolNumber } from './support.js'

const A = '+14155550141', B = '+14155550142'
/** TeXML that dials a party. */
const DIALS = /<Number[ >]/

t.test('Mode: message-only refuses calls, voice-only does not forward texts', async t => {
  const api = await startTelnyxService(t)
  const { driver, fake } = api
  for (const p of [A, B]) api.partyNumbers.add(p)
  const { client } = await facadeAccount(api)
  const svc = await client.proxy.v1.services.create({ uniqueName: 'modes' })
  const service = client.proxy.v1.services(svc.sid)
  const n1 = poolNumber(50), n2 = poolNumber(51)
  for (const n of [n1, n2]) await service.phoneNumbers.create({ phoneNumber: n })
  const sent = () => fake.requests.filter(q => q.path === '/v2/messages').length

  const m = await service.sessions.create({ mode: 'message-only', participants: [{ Identifier: A, ProxyIdentifier: n1 }, { Identifier: B, ProxyIdentifier: n1 }] })
  t.equal(m.mode, 'message-only')
  t.notMatch(await (await driver.voice({ from: A, to: n1, callSid: 'CA-mode-1' })).text(), DIALS, 'a call into a message-only session is not connected')
  let before = sent()
  await driver.smsReceived({ from: A, to: n1, text: 'on my way', messageId: 'mode-sms-1' })
  await api.svc.flushRecords()
  t.equal(sent(), before + 1, 'its texts are forwarded')
  await service.sessions(m.sid).update({ status: 'closed' })

  const v = await service.sessions.create({ mode: 'voice-only', participants: [{ Identifier: A, ProxyIdentifier: n2 }, { Identifier: B, ProxyIdentifier: n2 }] })
  t.equal(v.mode, 'voice-only')
  t.match(await (await driver.voice({ from: A, to: n2, callSid: 'CA-mode-2' })).text(), DIALS, 'a call into a voice-only session is connected')
  before = sent()
  await driver.smsReceived({ from: A, to: n2, text: 'hello', messageId: 'mode-sms-2' })
  await api.svc.flushRecords()
  t.equal(sent(), before, 'a text into a voice-only session is not forwarded')
})
