// Twilio's webhook signature on /v1/webhooks/twilio (api/cpaas/twilio/signature.ts): requests
// signed by the official SDK's getExpectedTwilioSignature over the public URL are accepted, with
// the URL's default port or without it, as twilio.validateRequest does; anything else is refused
// with a reason code only.
import t from 'tap'
import twilio from 'twilio'
import { createTwilioVerifier } from '../../api/cpaas/twilio/signature.js'
import { encodeForm } from '../../api/cpaas/form.js'

const TOKEN = '0123456789abcdef0123456789abcdef'
const BASE = 'https://mask.example.com'
const PATH = '/v1/webhooks/twilio/voice/status'
const QUERY = 'callId=0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b'
const FORM = { CallSid: 'CA123', From: '+12025550100', To: '+14155551001', CallStatus: 'completed', Caller: 'Zoë & co' }
const FORM_TYPE = 'application/x-www-form-urlencoded'

function request(signature: string | undefined, body = encodeForm(FORM), contentType = FORM_TYPE) {
  const headers: Record<string, string> = { 'content-type': contentType }
  if (signature !== undefined) headers['x-twilio-signature'] = signature
  return { headers, rawBody: Buffer.from(body), path: PATH, query: QUERY }
}
const sdkSign = (url: string, params: Record<string, string> = FORM, token = TOKEN) => twilio.getExpectedTwilioSignature(token, url, params)

t.test('signed by the SDK over the configured URL: accepted', async t => {
  const v = createTwilioVerifier({ authToken: TOKEN, publicBaseUrl: BASE })
  t.same(v.verify(request(sdkSign(`${BASE}${PATH}?${QUERY}`))), { ok: true })
  t.same(v.verify(request(sdkSign(`https://mask.example.com:443${PATH}?${QUERY}`))), { ok: true }, 'the URL with its default port, as Twilio may sign it')
  const withPort = createTwilioVerifier({ authToken: TOKEN, publicBaseUrl: () => 'https://mask.example.com:443/' })
  t.same(withPort.verify(request(sdkSign(`${BASE}${PATH}?${QUERY}`))), { ok: true }, 'a PUBLIC_BASE_URL with the port (and a slash) accepts the portless signature')
})

t.test('refused: tampered, other URL, other token, no header, not a form', async t => {
  const v = createTwilioVerifier({ authToken: TOKEN, publicBaseUrl: BASE })
  const good = sdkSign(`${BASE}${PATH}?${QUERY}`)
  t.same(v.verify(request(good, encodeForm({ ...FORM, CallStatus: 'busy' }))), { ok: false, reason: 'bad-signature' }, 'a changed field')
  t.same(v.verify(request(good, encodeForm({ ...FORM, Extra: '1' }))), { ok: false, reason: 'bad-signature' }, 'an added field')
  t.same(v.verify(request(sdkSign(`${BASE}${PATH}`))), { ok: false, reason: 'bad-signature' }, 'signed without the query')
  t.same(v.verify(request(sdkSign(`https://other.example.com${PATH}?${QUERY}`))), { ok: false, reason: 'bad-signature' }, 'another host')
  t.same(v.verify(request(sdkSign(`${BASE}${PATH}?${QUERY}`, FORM, 'f'.repeat(32)))), { ok: false, reason: 'bad-signature' }, 'another token')
  t.same(v.verify(request(undefined)), { ok: false, reason: 'missing-signature' })
  t.same(v.verify(request(good, JSON.stringify(FORM), 'application/json')), { ok: false, reason: 'bad-body' }, 'Twilio posts forms')
  t.same(v.verify(request(good, 'a=%ZZ')), { ok: false, reason: 'bad-body' }, 'a malformed form')
  t.throws(() => createTwilioVerifier({ authToken: '', publicBaseUrl: BASE }), /TWILIO_AUTH_TOKEN/)
})

t.test('a repeated field is signed as the SDK signs an array', async t => {
  const v = createTwilioVerifier({ authToken: TOKEN, publicBaseUrl: BASE })
  const body = 'To=%2B1&From=%2B2&Media=b&Media=a'
  const sig = twilio.getExpectedTwilioSignature(TOKEN, `${BASE}${PATH}?${QUERY}`, { To: '+1', From: '+2', Media: ['b', 'a'] } as never)
  t.same(v.verify(request(sig, body)), { ok: true })
})
