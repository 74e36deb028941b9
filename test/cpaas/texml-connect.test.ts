// contract D5: the TeXML answer for a routable session, in order: consent (when recording), Dial.
import t from 'tap'
import { connectTexml, CONSENT_MESSAGE, decisionTexml, TEXML_CONTENT_TYPE } from '../../api/cpaas/telnyx/texml.js'

const BASE = 'https://mask.example.com'
const CB = `${BASE}/v1/webhooks/cpaas/voice`
const base = {
  baseUrl: BASE,
  callId: '0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b',
  to: '+12025550142',
  callerId: '+12025550100',
  consentAudioUrl: null,
} as const

const dialOpen = (extra = '') =>
  `<Dial callerId="+12025550100" timeLimit="3600" action="${CB}/dial-status?callId=${base.callId}"${extra}>`
const number = `<Number statusCallback="${CB}/status?callId=${base.callId}" statusCallbackEvent="initiated ringing answered completed">+12025550142</Number></Dial>`
const rec = ` record="record-from-answer-dual" recordingStatusCallback="${CB}/recording?callId=${base.callId}"`

t.test('without recording: only the Dial, no consent, no record attributes', async t => {
  t.equal(
    connectTexml({ ...base, recording: false, consent: 'NONE' }),
    `<?xml version="1.0" encoding="UTF-8"?><Response>${dialOpen()}${number}</Response>`,
  )
  // consent mode is irrelevant when not recording
  t.equal(connectTexml({ ...base, recording: false, consent: 'DEFAULT' }), connectTexml({ ...base, recording: false, consent: 'NONE' }))
  t.equal(TEXML_CONTENT_TYPE, 'application/xml')
})

t.test('recording with DEFAULT consent: Say before the Dial, record-from-answer-dual', async t => {
  t.equal(
    connectTexml({ ...base, recording: true, consent: 'DEFAULT' }),
    `<?xml version="1.0" encoding="UTF-8"?><Response><Say>${CONSENT_MESSAGE}</Say>${dialOpen(rec)}${number}</Response>`,
  )
})

t.test('recording with CUSTOM consent: Play of the tenant audio before the Dial', async t => {
  const xml = connectTexml({ ...base, recording: true, consent: 'CUSTOM', consentAudioUrl: 'https://cdn.example.com/consent.mp3?a=1&b=2' })
  t.equal(
    xml,
    `<?xml version="1.0" encoding="UTF-8"?><Response><Play>https://cdn.example.com/consent.mp3?a=1&amp;b=2</Play>${dialOpen(rec)}${number}</Response>`,
  )
})

t.test('R-REC: recording never starts without an announcement', async t => {
  const custom = connectTexml({ ...base, recording: true, consent: 'CUSTOM', consentAudioUrl: null })
  t.match(custom, /<Response><Say>[^<]+<\/Say><Dial /, 'CUSTOM without audio falls back to the spoken default')
  const none = connectTexml({ ...base, recording: true, consent: 'NONE' })
  t.match(none, /<Response><Say>[^<]+<\/Say><Dial /, 'NONE with recording (invalid) still announces')
})

t.test('timeLimit: default 3600 (contract 8.7), override, invalid values fall back', async t => {
  t.match(connectTexml({ ...base, recording: false, consent: 'NONE', timeLimitSeconds: 600 }), / timeLimit="600" /)
  t.match(connectTexml({ ...base, recording: false, consent: 'NONE', timeLimitSeconds: 0 }), / timeLimit="3600" /)
  t.match(connectTexml({ ...base, recording: false, consent: 'NONE', timeLimitSeconds: 1.5 }), / timeLimit="3600" /)
})

t.test('base URL with a trailing slash and a path prefix; callId is URL-encoded', async t => {
  const xml = connectTexml({ ...base, baseUrl: 'https://x.example/maskline/', callId: 'a b&c', recording: false, consent: 'NONE' })
  t.match(xml, /action="https:\/\/x\.example\/maskline\/v1\/webhooks\/cpaas\/voice\/dial-status\?callId=a%20b%26c"/)
})

t.test('decisionTexml connect uses the decision fields and needs a callId', async t => {
  const decision = {
    kind: 'connect' as const, sessionId: 's', tenantId: 't', direction: 'A_TO_B' as const,
    to: base.to, callerId: base.callerId, recording: true, consent: 'DEFAULT' as const, consentAudioUrl: null,
  }
  t.equal(decisionTexml(decision, { baseUrl: BASE, callId: base.callId }), connectTexml({ ...base, recording: true, consent: 'DEFAULT' }))
  t.throws(() => decisionTexml(decision, { baseUrl: BASE }), /callId/)
})
