// Standard Webhooks signing (contract D6), checked against the reference library's own vector.
import t from 'tap'
import { generateSecret, secretKey, sign, signatureHeaders, verify } from '../../api/webhooks/signing.js'

// standard-webhooks/standard-webhooks libraries/javascript/src/webhook.test.ts "sign function works"
const VECTOR = {
  secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
  id: 'msg_p5jXN8AQM9LWM0D4loKWxJek',
  timestamp: 1614265330,
  body: '{"test": 2432232314}',
  signature: 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
}

t.test('matches the Standard Webhooks reference vector', async t => {
  t.equal(sign(VECTOR.secret, VECTOR.id, VECTOR.timestamp, VECTOR.body), VECTOR.signature)
  // the key is the base64 part after whsec_, so the bare secret signs the same
  t.equal(sign(VECTOR.secret.slice(6), VECTOR.id, VECTOR.timestamp, VECTOR.body), VECTOR.signature)
  t.same(signatureHeaders(VECTOR.secret, VECTOR.id, VECTOR.timestamp, VECTOR.body), {
    'webhook-id': VECTOR.id,
    'webhook-timestamp': '1614265330',
    'webhook-signature': VECTOR.signature,
  })
})

t.test('verify accepts the vector within the tolerance and refuses outside it', async t => {
  const headers = signatureHeaders(VECTOR.secret, VECTOR.id, VECTOR.timestamp, VECTOR.body)
  const at = VECTOR.timestamp * 1000
  t.same(verify(VECTOR.secret, VECTOR.body, headers, { now: at }), { ok: true })
  t.same(verify(VECTOR.secret, VECTOR.body, headers, { now: at + 299_000 }), { ok: true })
  t.same(verify(VECTOR.secret, VECTOR.body, headers, { now: at + 301_000 }), { ok: false, reason: 'stale-timestamp' })
  t.same(verify(VECTOR.secret, VECTOR.body, headers, { now: at - 301_000 }), { ok: false, reason: 'stale-timestamp' })
})

t.test('verify refuses tampering and malformed headers', async t => {
  const at = VECTOR.timestamp * 1000
  const h = signatureHeaders(VECTOR.secret, VECTOR.id, VECTOR.timestamp, VECTOR.body)
  t.same(verify(VECTOR.secret, VECTOR.body + ' ', h, { now: at }), { ok: false, reason: 'bad-signature' })
  t.same(verify(VECTOR.secret, VECTOR.body, { ...h, 'webhook-id': 'msg_other' }, { now: at }), { ok: false, reason: 'bad-signature' })
  t.same(verify(generateSecret(), VECTOR.body, h, { now: at }), { ok: false, reason: 'bad-signature' })
  t.same(verify(VECTOR.secret, VECTOR.body, { ...h, 'webhook-signature': 'v1,' }, { now: at }), { ok: false, reason: 'bad-signature' })
  t.same(verify(VECTOR.secret, VECTOR.body, { ...h, 'webhook-signature': h['webhook-signature'].slice(0, 8) }, { now: at }), { ok: false, reason: 'bad-signature' })
  t.same(verify(VECTOR.secret, VECTOR.body, { ...h, 'webhook-signature': h['webhook-signature'].replace('v1,', 'v2,') }, { now: at }), { ok: false, reason: 'bad-signature' })
  t.same(verify(VECTOR.secret, VECTOR.body, { ...h, 'webhook-timestamp': 'hello' }, { now: at }), { ok: false, reason: 'bad-timestamp' })
  const { 'webhook-id': _id, ...noId } = h
  t.same(verify(VECTOR.secret, VECTOR.body, noId, { now: at }), { ok: false, reason: 'missing-headers' })
})

t.test('several space-separated signatures: any valid v1 passes (key rotation)', async t => {
  const h = signatureHeaders(VECTOR.secret, VECTOR.id, VECTOR.timestamp, VECTOR.body)
  const sigs = ['v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=', 'v2,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=', h['webhook-signature']]
  t.same(verify(VECTOR.secret, VECTOR.body, { ...h, 'webhook-signature': sigs.join(' ') }, { now: VECTOR.timestamp * 1000 }), { ok: true })
})

t.test('generateSecret: whsec_ + base64 of 24..64 random bytes', async t => {
  const s = generateSecret()
  t.match(s, /^whsec_[A-Za-z0-9+/]+=*$/)
  t.equal(secretKey(s).length, 32)
  t.equal(secretKey(generateSecret(24)).length, 24)
  t.not(generateSecret(), generateSecret())
  t.throws(() => generateSecret(16))
  t.throws(() => secretKey('whsec_'))
  t.throws(() => secretKey('whsec_not base64!'))
})
