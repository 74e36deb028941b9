// The TwiML answers (api/cpaas/twilio/twiml.ts) are the documents the official twilio SDK's own
// builder (twilio.twiml.VoiceResponse) makes for the same verbs and attributes, byte for byte, and
// their callbacks go to /v1/webhooks/twilio. Every routing decision is covered.
import t from 'tap'
import twilio from 'twilio'
import { CONSENT_MESSAGE, ENDED_MESSAGE, OUT_OF_SERVICE_MESSAGE, type RouteDecision } from '../../api/cpaas/telnyx/texml.js'
import { decisionTwiml, TWILIO_CALLBACK_PREFIX } from '../../api/cpaas/twilio/twiml.js'

const BASE = 'https://mask.example.com'
const callId = '0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b'
const cb = (path: string) => `${BASE}${TWILIO_CALLBACK_PREFIX}/voice/${path}?callId=${callId}`
const connect = (over: Partial<Extract<RouteDecision, { kind: 'connect' }>> = {}): RouteDecision => ({
  kind: 'connect', sessionId: 's', tenantId: 't', direction: 'A_TO_B', to: '+12025550142', callerId: '+12025550100',
  recording: false, consent: 'NONE', consentAudioUrl: null, ...over,
})

/** The SDK's document for a Dial to `to` from `callerId`, recorded or not. */
function sdkDial(r: twilio.twiml.VoiceResponse, recording: boolean) {
  const dial = r.dial({
    callerId: '+12025550100', timeLimit: 3600, action: cb('dial-status'),
    ...(recording ? { record: 'record-from-answer-dual', recordingStatusCallback: cb('recording') } : {}),
  })
  dial.number({ statusCallback: cb('status'), statusCallbackEvent: ['initiated', 'ringing', 'answered', 'completed'] }, '+12025550142')
  return r.toString()
}

t.test('connect: the Dial (and the consent before it when recording) as the SDK builds it', async t => {
  t.equal(decisionTwiml(connect(), { baseUrl: BASE, callId }), sdkDial(new twilio.twiml.VoiceResponse(), false))
  const spoken = new twilio.twiml.VoiceResponse()
  spoken.say(CONSENT_MESSAGE)
  t.equal(decisionTwiml(connect({ recording: true, consent: 'DEFAULT' }), { baseUrl: BASE, callId }), sdkDial(spoken, true), 'consent spoken, then recorded')
  const played = new twilio.twiml.VoiceResponse()
  played.play('https://cdn.example.com/consent.mp3?a=1&b=2')
  t.equal(decisionTwiml(connect({ recording: true, consent: 'CUSTOM', consentAudioUrl: 'https://cdn.example.com/consent.mp3?a=1&b=2' }), { baseUrl: BASE, callId }), sdkDial(played, true), 'custom consent audio, escaped alike')
  t.equal(decisionTwiml(connect(), { baseUrl: `${BASE}/`, callId }), decisionTwiml(connect(), { baseUrl: BASE, callId }), 'a trailing slash on the base URL is tolerated')
  t.throws(() => decisionTwiml(connect(), { baseUrl: BASE }), /callId is required/, 'no call id, no connect')
})

t.test('refusals and expired behaviours', async t => {
  const reject = (reason?: 'rejected') => { const r = new twilio.twiml.VoiceResponse(); r.reject(reason ? { reason } : {}); return r.toString() }
  t.equal(decisionTwiml({ kind: 'direction-not-allowed' }, { baseUrl: BASE }), reject('rejected'))
  t.equal(decisionTwiml({ kind: 'channel-not-allowed' }, { baseUrl: BASE }), reject('rejected'))
  t.equal(decisionTwiml({ kind: 'unknown-proxy' }, { baseUrl: BASE }), reject())
  const sayHangup = (text: string) => { const r = new twilio.twiml.VoiceResponse(); r.say(text); r.hangup(); return r.toString() }
  t.equal(decisionTwiml({ kind: 'no-session', proxy: '+12025550100', tenant: null }, { baseUrl: BASE }), sayHangup(OUT_OF_SERVICE_MESSAGE))
  t.equal(decisionTwiml({ kind: 'no-session', proxy: '+12025550100', tenant: { expiredCallBehavior: 'PLAY_MESSAGE', supportPhone: null } }, { baseUrl: BASE }), sayHangup(ENDED_MESSAGE))
  const support = new twilio.twiml.VoiceResponse()
  support.dial({ callerId: '+12025550100' }).number('+14155550999')
  t.equal(decisionTwiml({ kind: 'no-session', proxy: '+12025550100', tenant: { expiredCallBehavior: 'REDIRECT_SUPPORT', supportPhone: '+14155550999' } }, { baseUrl: BASE }), support.toString())
})
