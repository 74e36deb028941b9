// contract D5 POST /sms: Telnyx JSON (message.received / sent / finalized) or form → one shape.
import t from 'tap'
import { encodeForm } from '../../api/cpaas/form.js'
import { mapTelnyxStatus, normalizeFormSms, normalizeTelnyxSms, parseSmsCallback } from '../../api/cpaas/sms-payload.js'
import { telnyxSmsReceivedBody, telnyxSmsStatusBody } from '../support/callback-driver.js'

// Telnyx's documented inbound example (developers.telnyx.com, callbacks/inbound-message), trimmed.
const documentedInbound = {
  data: {
    record_type: 'event', id: 'bf6307bd-884d-4c1f-b6ea-c62b8c495d3c', event_type: 'message.received',
    occurred_at: '2019-01-23T18:10:02.574Z',
    payload: {
      record_type: 'message', direction: 'inbound', id: '7ee4241c-f127-47e5-9c34-3aac291f8058', type: 'SMS',
      messaging_profile_id: '0f512bda-ae1e-4597-8e11-e5f5686b97d3',
      from: { phone_number: '+18665550001', carrier: 'T-MOBILE USA, INC.', line_type: 'Wireless' },
      to: [{ phone_number: '+18445550001', status: 'delivered', carrier: 'TELNYX LLC', line_type: 'VoIP' }],
      cc: [], text: 'Hello, World!', media: [], encoding: 'GSM-7', parts: 1,
    },
  },
}

t.test('Telnyx message.received → inbound, keyed by the message id (not the event id)', async t => {
  t.same(normalizeTelnyxSms(documentedInbound), {
    kind: 'inbound', messageId: '7ee4241c-f127-47e5-9c34-3aac291f8058', from: '+18665550001', to: '+18445550001', text: 'Hello, World!',
  })
  const raw = telnyxSmsReceivedBody({ from: '+12025550142', to: '+12025550100', text: 'Zoë 📞', messageId: 'm-1' })
  t.same(parseSmsCallback('application/json; charset=utf-8', Buffer.from(raw)),
    { kind: 'inbound', messageId: 'm-1', from: '+12025550142', to: '+12025550100', text: 'Zoë 📞' })
})

t.test('media-only inbound has empty text', async t => {
  const body = structuredClone(documentedInbound) as { data: { payload: Record<string, unknown> } }
  delete body.data.payload.text
  t.match(normalizeTelnyxSms(body), { kind: 'inbound', text: '' })
})

t.test('Telnyx message.sent / message.finalized → status', async t => {
  const cases: Array<[string, 'message.sent' | 'message.finalized', string]> = [
    ['sent', 'message.sent', 'SENT'],
    ['queued', 'message.sent', 'QUEUED'],
    ['delivered', 'message.finalized', 'DELIVERED'],
    ['delivery_failed', 'message.finalized', 'FAILED'],
    ['sending_failed', 'message.finalized', 'FAILED'],
    ['delivery_unconfirmed', 'message.finalized', 'SENT'],
  ]
  for (const [status, eventType, want] of cases) {
    t.same(parseSmsCallback('application/json', telnyxSmsStatusBody({ messageId: 'out-1', eventType, status })),
      { kind: 'status', messageId: 'out-1', status: want }, `${eventType} ${status}`)
  }
  t.same(parseSmsCallback('application/json', telnyxSmsStatusBody({ messageId: 'out-1', eventType: 'message.sent', status: 'weird' })),
    { kind: 'status', messageId: 'out-1', status: 'SENT' }, 'message.sent with an unknown recipient status is SENT')
  t.same(parseSmsCallback('application/json', telnyxSmsStatusBody({ messageId: 'out-1', eventType: 'message.finalized', status: 'weird' })),
    { kind: 'ignored' }, 'finalized with an unknown status is ignored')
  t.equal(mapTelnyxStatus(null), null)
})

t.test('other Telnyx event types are ignored', async t => {
  t.same(normalizeTelnyxSms({ data: { event_type: 'call.initiated', payload: {} } }), { kind: 'ignored' })
})

t.test('invalid Telnyx bodies', async t => {
  for (const bad of [null, 1, 'x', [], {}, { data: [] }, { data: {} }, { data: { event_type: 'message.received' } },
    { data: { event_type: 'message.received', payload: { id: 'm' } } },
    { data: { event_type: 'message.received', payload: { from: { phone_number: '+1' }, to: [{ phone_number: '+2' }] } } },
    { data: { event_type: 'message.received', payload: { id: 'm', from: { phone_number: '+1' }, to: [] } } },
    { data: { event_type: 'message.received', payload: { id: 'm', from: '+1', to: [{ phone_number: '+2' }] } } }]) {
    t.same(normalizeTelnyxSms(bad), { kind: 'invalid' }, JSON.stringify(bad))
  }
  t.same(parseSmsCallback('application/json', '{not json'), { kind: 'invalid' })
})

t.test('form inbound (MessageSid, From, To, Body)', async t => {
  const body = encodeForm({ MessageSid: 'SM1', From: '+12025550142', To: '+12025550100', Body: 'hi there', AccountSid: 'AC1', Unknown: 'x' })
  t.same(parseSmsCallback('application/x-www-form-urlencoded', Buffer.from(body)),
    { kind: 'inbound', messageId: 'SM1', from: '+12025550142', to: '+12025550100', text: 'hi there' })
  t.same(normalizeFormSms({ MessageSid: 'SM2', From: '+1', To: '+2', SmsStatus: 'received' }),
    { kind: 'inbound', messageId: 'SM2', from: '+1', to: '+2', text: '' })
  t.same(parseSmsCallback(undefined, 'SmsSid=SM3&From=%2B1&To=%2B2&Body=x'), { kind: 'inbound', messageId: 'SM3', from: '+1', to: '+2', text: 'x' },
    'no content-type: form')
})

t.test('form status callbacks', async t => {
  const cases = [['queued', 'QUEUED'], ['sent', 'SENT'], ['delivered', 'DELIVERED'], ['undelivered', 'FAILED'], ['failed', 'FAILED']] as const
  for (const [raw, want] of cases) {
    t.same(normalizeFormSms({ MessageSid: 'SM1', MessageStatus: raw }), { kind: 'status', messageId: 'SM1', status: want }, raw)
  }
  t.same(normalizeFormSms({ MessageSid: 'SM1', MessageStatus: 'mystery' }), { kind: 'ignored' })
})

t.test('invalid forms', async t => {
  t.same(parseSmsCallback('application/x-www-form-urlencoded', 'From=%2B1&To=%2B2&Body=x'), { kind: 'invalid' }, 'no message id')
  t.same(parseSmsCallback('application/x-www-form-urlencoded', 'MessageSid=SM1&To=%2B2'), { kind: 'invalid' }, 'no From')
  t.same(parseSmsCallback('application/x-www-form-urlencoded', 'MessageSid=SM1&From=%zz'), { kind: 'invalid' }, 'malformed encoding')
})
