// Routing of a routable session (contract 3.1 direction modes, R-REC, contract D5 voice answer inputs).
import t from 'tap'
import { AGENT, CUSTOMER, TENANT_A, harness, tenant, us } from './helpers.js'

t.test('BIDIRECTIONAL: the agent reaches the customer and the customer reaches the agent', async t => {
  const h = harness()
  const s = h.create()
  t.same(h.engine.route(s.proxyNumber, AGENT, h.clock.now), {
    kind: 'connect',
    sessionId: s.id,
    tenantId: TENANT_A.id,
    direction: 'A_TO_B',
    to: CUSTOMER,
    callerId: s.proxyNumber,
    recording: false,
    consent: 'DEFAULT',
    consentAudioUrl: null,
  })
  t.match(h.engine.route(s.proxyNumber, CUSTOMER, h.clock.now), { kind: 'connect', direction: 'B_TO_A', to: AGENT, callerId: s.proxyNumber })
})

t.test('A_TO_B_ONLY: only the agent calls out', async t => {
  const h = harness()
  const s = h.create({ directionMode: 'A_TO_B_ONLY' })
  t.match(h.engine.route(s.proxyNumber, AGENT, h.clock.now), { kind: 'connect', direction: 'A_TO_B', to: CUSTOMER })
  t.same(h.engine.route(s.proxyNumber, CUSTOMER, h.clock.now), { kind: 'direction-not-allowed', sessionId: s.id, tenantId: TENANT_A.id, direction: 'B_TO_A' })
})

t.test('B_TO_A_ONLY: only party B reaches the agent', async t => {
  const h = harness()
  const s = h.create({ directionMode: 'B_TO_A_ONLY' })
  t.match(h.engine.route(s.proxyNumber, CUSTOMER, h.clock.now), { kind: 'connect', direction: 'B_TO_A', to: AGENT })
  t.same(h.engine.route(s.proxyNumber, AGENT, h.clock.now), { kind: 'direction-not-allowed', sessionId: s.id, tenantId: TENANT_A.id, direction: 'A_TO_B' })
})

t.test('recording with the default consent prompt', async t => {
  const h = harness()
  const s = h.create({ recordingEnabled: true, consentPrompt: 'DEFAULT' })
  t.match(h.engine.route(s.proxyNumber, AGENT, h.clock.now), { recording: true, consent: 'DEFAULT', consentAudioUrl: null })
})

t.test('CUSTOM consent plays the tenant audio; a config change applies to live sessions at once', async t => {
  const a = tenant(TENANT_A.id, { recordingConsentAudioUrl: 'https://cdn.example/consent-v1.mp3' })
  const h = harness({ tenants: [a] })
  const s = h.create({ recordingEnabled: true, consentPrompt: 'CUSTOM' })
  t.match(h.engine.route(s.proxyNumber, CUSTOMER, h.clock.now), { recording: true, consent: 'CUSTOM', consentAudioUrl: 'https://cdn.example/consent-v1.mp3' })
  h.engine.upsertTenant({ ...a, recordingConsentAudioUrl: 'https://cdn.example/consent-v2.mp3' })
  t.match(h.engine.route(s.proxyNumber, CUSTOMER, h.clock.now), { consentAudioUrl: 'https://cdn.example/consent-v2.mp3' }, 'a new object via upsertTenant')
  const shared = tenant(TENANT_A.id, { recordingConsentAudioUrl: 'https://cdn.example/v3.mp3' })
  h.engine.upsertTenant(shared)
  shared.recordingConsentAudioUrl = 'https://cdn.example/v4.mp3'
  t.match(h.engine.route(s.proxyNumber, CUSTOMER, h.clock.now), { consentAudioUrl: 'https://cdn.example/v4.mp3' }, 'the same object mutated in place')
})

t.test('NONE consent without recording', async t => {
  const h = harness()
  const s = h.create({ recordingEnabled: false, consentPrompt: 'NONE' })
  t.match(h.engine.route(s.proxyNumber, AGENT, h.clock.now), { kind: 'connect', recording: false, consent: 'NONE', consentAudioUrl: null })
})

t.test('several sessions on one proxy each route their own parties', async t => {
  const h = harness()
  const a = h.create({ agentPhone: us(50), customerPhone: us(60) })
  const b = h.create({ agentPhone: us(51), customerPhone: us(61) })
  t.equal(a.proxyNumber, b.proxyNumber)
  t.match(h.engine.route(a.proxyNumber, us(60), h.clock.now), { sessionId: a.id, to: us(50) })
  t.match(h.engine.route(a.proxyNumber, us(51), h.clock.now), { sessionId: b.id, to: us(61) })
})
