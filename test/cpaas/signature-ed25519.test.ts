// contract D5: telnyx-ed25519 — Ed25519 over "<telnyx-timestamp>|<raw body>", timestamp within 300 s.
import t from 'tap'
import { TelnyxWebhook } from 'telnyx/lib/webhooks'
import { createSignatureVerifier, ed25519PublicKeyFromBase64 } from '../../api/cpaas/signature.js'
import { generateTelnyxKeyPair, signTelnyx } from '../support/callback-driver.js'

const NOW = Date.UTC(2026, 10, 22, 10, 0, 0)
const NOW_S = NOW / 1000
const keys = generateTelnyxKeyPair()
const verifier = createSignatureVerifier({ mode: 'telnyx-ed25519', telnyxPublicKey: keys.publicKeyBase64, publicBaseUrl: 'https://x.example', now: () => NOW })
const BODY = 'CallSid=v3%3Aabc&From=%2B12025550142&To=%2B12025550100'
const req = (headers: Record<string, string>, body = BODY) => ({
  headers, rawBody: Buffer.from(body), path: '/v1/webhooks/cpaas/voice', query: '',
})

t.test('a correctly signed request is accepted', async t => {
  t.same(verifier.verify(req(signTelnyx(keys.privateKey, BODY, NOW_S))), { ok: true })
  t.same(verifier.verify(req(signTelnyx(keys.privateKey, '', NOW_S), '')), { ok: true }, 'empty body')
  const json = JSON.stringify({ data: { event_type: 'message.received', payload: { text: 'Zoë 📞' } } })
  t.same(verifier.verify(req(signTelnyx(keys.privateKey, json, NOW_S), json)), { ok: true }, 'UTF-8 JSON body')
})

t.test('tampered body, wrong key, truncated or garbage signature: bad-signature', async t => {
  const h = signTelnyx(keys.privateKey, BODY, NOW_S)
  t.same(verifier.verify(req(h, BODY.replace('0142', '0143'))), { ok: false, reason: 'bad-signature' })
  const other = generateTelnyxKeyPair()
  t.same(verifier.verify(req(signTelnyx(other.privateKey, BODY, NOW_S))), { ok: false, reason: 'bad-signature' })
  t.same(verifier.verify(req({ ...h, 'telnyx-signature-ed25519': h['telnyx-signature-ed25519']!.slice(0, 40) })), { ok: false, reason: 'bad-signature' })
  t.same(verifier.verify(req({ ...h, 'telnyx-signature-ed25519': '!!!not base64!!!' })), { ok: false, reason: 'bad-signature' })
  t.same(verifier.verify(req({ ...h, 'telnyx-timestamp': String(NOW_S + 1) })), { ok: false, reason: 'bad-signature' }, 'timestamp is signed')
})

t.test('stale or future timestamps beyond 300 s are refused; the bound itself is accepted', async t => {
  t.same(verifier.verify(req(signTelnyx(keys.privateKey, BODY, NOW_S - 301))), { ok: false, reason: 'stale-timestamp' })
  t.same(verifier.verify(req(signTelnyx(keys.privateKey, BODY, NOW_S + 301))), { ok: false, reason: 'stale-timestamp' })
  t.same(verifier.verify(req(signTelnyx(keys.privateKey, BODY, NOW_S - 300))), { ok: true })
  t.same(verifier.verify(req(signTelnyx(keys.privateKey, BODY, NOW_S + 300))), { ok: true })
})

t.test('missing or malformed headers', async t => {
  const h = signTelnyx(keys.privateKey, BODY, NOW_S)
  t.same(verifier.verify(req({})), { ok: false, reason: 'missing-signature' })
  t.same(verifier.verify(req({ 'telnyx-timestamp': h['telnyx-timestamp']! })), { ok: false, reason: 'missing-signature' })
  t.same(verifier.verify(req({ 'telnyx-signature-ed25519': h['telnyx-signature-ed25519']! })), { ok: false, reason: 'missing-timestamp' })
  for (const ts of ['-1', '1.5', 'abc', '1e9', '9999999999999']) {
    t.same(verifier.verify(req({ ...h, 'telnyx-timestamp': ts })), { ok: false, reason: 'bad-timestamp' }, ts)
  }
})

t.test('interop: a signature our verifier accepts is accepted by the telnyx SDK verifier too', async t => {
  const ts = Math.floor(Date.now() / 1000)
  const h = signTelnyx(keys.privateKey, BODY, ts)
  await t.resolves(new TelnyxWebhook(keys.publicKeyBase64).verify(BODY, h))
  const live = createSignatureVerifier({ mode: 'telnyx-ed25519', telnyxPublicKey: keys.publicKeyBase64, publicBaseUrl: 'https://x.example' })
  t.same(live.verify(req(h)), { ok: true }, 'default clock is Date.now')
})

t.test('the public key must be base64 of 32 raw bytes; the error does not echo it', async t => {
  t.ok(ed25519PublicKeyFromBase64(keys.publicKeyBase64))
  for (const bad of ['', 'abc', Buffer.alloc(31).toString('base64'), Buffer.alloc(33).toString('base64'), 'not base64 at all!!']) {
    t.throws(() => ed25519PublicKeyFromBase64(bad), { message: /TELNYX_PUBLIC_KEY must be/ })
  }
  const secretish = Buffer.alloc(44, 7).toString('base64')
  try { ed25519PublicKeyFromBase64(secretish); t.fail('should throw') } catch (e) { t.notMatch((e as Error).message, secretish) }
  t.throws(() => createSignatureVerifier({ mode: 'telnyx-ed25519', publicBaseUrl: 'https://x.example' }), /needs TELNYX_PUBLIC_KEY/)
})
