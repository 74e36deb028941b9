// A Service's callback_url (docs/twilio-proxy.md, Callbacks): each call and SMS of a façade session
// and each status change of a call, and each MessageInteraction, is POSTed to it as the Interaction's form, signed with
// X-Twilio-Signature under the account's auth token (the `twilio` SDK's validateRequest accepts it,
// under a wrong token it does not), through the webhook outbox: a failing receiver is retried, and
// the retry carries the same interaction. Participant SIDs only, never a number or a text.
import t from 'tap'
import twilio from 'twilio'
import { sql } from 'slonik'
import { startTelnyxService } from '../support/service.js'
import { startWebhookReceiver, type ReceivedDelivery } from '../support/webhook-receiver.js'
import { facadeAccount, poolNumber } from './support.js'
import { floorId, outboxRowsAfter } from '../../sql/outbox.js'

const A = '+14155550141', B = '+14155550142'

const form = (d: ReceivedDelivery) => Object.fromEntries(new URLSearchParams(d.body))

t.test('callback_url gets every interaction, signed, with retries', async t => {
  let offset = 0
  const api = await startTelnyxService(t, { now: () => Date.now() + offset })
  const { driver } = api
  for (const p of [A, B]) api.partyNumbers.add(p)
  const receiver = await startWebhookReceiver()
  t.teardown(() => receiver.close())
  const { client, authToken, accountSid, tenantId } = await facadeAccount(api)
  const svc = await client.proxy.v1.services.create({ uniqueName: 'callbacks', callbackUrl: receiver.url })
  const service = client.proxy.v1.services(svc.sid)
  for (const n of [poolNumber(50), poolNumber(51)]) await service.phoneNumbers.create({ phoneNumber: n })
  const s = await service.sessions.create({ participants: [{ Identifier: A }, { Identifier: B }] })
  const [pa, pb] = await service.sessions(s.sid).participants.list()

  receiver.script({ status: 500 }) // the first attempt fails
  const texml = await (await driver.voice({ from: A, to: pa!.proxyIdentifier, callSid: 'CA-cb1' })).text()
  await receiver.waitFor(1)
  t.equal(receiver.deliveries[0]!.answered, 500)
  offset += 6_000 // the second attempt is due 5 s later (the dispatcher's schedule)
  await receiver.waitFor(2)
  const [failed, first] = receiver.deliveries
  t.equal(first!.body, failed!.body, 'the retry carries the same interaction')

  const p = form(first!)
  const signature = first!.headers['x-twilio-signature'] as string
  t.equal(first!.headers['content-type'], 'application/x-www-form-urlencoded')
  t.ok(twilio.validateRequest(authToken, signature, receiver.url, p), 'validateRequest accepts it under the auth token')
  t.notOk(twilio.validateRequest('0'.repeat(32), signature, receiver.url, p), 'and not under another token')
  t.notOk(twilio.validateRequest(authToken, signature, receiver.url, { ...p, interactionType: 'Message' }), 'nor a changed form')
  t.match(p, {
    interactionSid: /^KI[0-9a-f]{32}$/, interactionSessionSid: s.sid, interactionServiceSid: svc.sid, interactionAccountSid: accountSid,
    interactionType: 'Voice', interactionDateCreated: /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/,
    inboundParticipantSid: pa!.sid, inboundResourceSid: /^CA[0-9a-f]{32}$/, inboundResourceType: 'Call',
    outboundParticipantSid: pb!.sid, outboundResourceSid: /^CA[0-9a-f]{32}$/, outboundResourceStatus: 'ringing',
  })

  // the call's end is a status change: the same interaction again
  const callId = /callId=([0-9a-f-]{36})/.exec(texml)![1]!
  await driver.dialStatus({ callId, callSid: 'CA-cb1', dialCallStatus: 'completed', dialCallDuration: 42 })
  await driver.smsReceived({ from: B, to: pb!.proxyIdentifier, text: 'secret words', messageId: 'cb-sms-1' })
  await receiver.waitFor(5)
  const later = receiver.deliveries.slice(2).map(form)
  const ended = later.find(q => q.interactionType === 'Voice' && q.inboundResourceStatus === 'completed')
  t.match(ended, { interactionSid: p.interactionSid, interactionData: '{"duration":"42"}', outboundResourceStatus: 'completed' })
  const sms = later.find(q => q.interactionType === 'Message')
  t.match(sms, { interactionSessionSid: s.sid, inboundParticipantSid: pb!.sid, outboundParticipantSid: pa!.sid, inboundResourceType: 'Message' })
  // a MessageInteraction sent through the API is an interaction too
  const mi = await service.sessions(s.sid).participants(pa!.sid).messageInteractions.create({ body: 'secret words' })
  await receiver.waitFor(6)
  t.match(form(receiver.deliveries[5]!), {
    interactionSid: mi.sid, interactionType: 'Message', interactionSessionSid: s.sid, inboundParticipantSid: '',
    outboundParticipantSid: pa!.sid, outboundResourceSid: mi.outboundResourceSid, outboundResourceStatus: 'sent',
  })
  // a text never forwarded (to a party who opted out) is no interaction: its sms.blocked is not queued for the callback
  await driver.smsReceived({ from: B, to: pb!.proxyIdentifier, text: 'STOP', messageId: 'cb-sms-stop' })
  await driver.smsReceived({ from: A, to: pa!.proxyIdentifier, text: 'anyone there?', messageId: 'cb-sms-2' })
  await api.svc.flushRecords()
  const blocked = await api.svc.db.pool.any(sql.unsafe`SELECT outcome FROM outbox WHERE tenant_id = ${tenantId} AND type = 'sms.blocked'`)
  t.same(blocked.map(r => r.outcome), ['skipped'])
  const replayed = await outboxRowsAfter(api.svc.db.pool, { afterId: floorId(0), tenantIds: [tenantId], limit: 1000 })
  t.ok(replayed.length > 0 && replayed.every(r => !r.json.includes('twilio.interaction')), 'the MessageInteraction callback is no stream event')
  for (const d of receiver.deliveries) {
    t.ok(twilio.validateRequest(authToken, d.headers['x-twilio-signature'] as string, receiver.url, form(d)))
    t.notMatch(d.body, /4155550|secret words|2025550/, 'no number, no text')
  }
})
