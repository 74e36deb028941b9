// Standard Webhooks signing (contract D6), checked against the reference library's own vector.
import t from 'tap'
import { generateSecret, secretKey, sign, signatureHeaders } from '../../api/webhooks/signing.js'
import { verifyDelivery } from '../support/standard-webhooks.js'

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

t.test('the standardwebhooks package verifies what we sign, within its tolerance, and nothing tampered', async t => {
  const at = VECTOR.timestamp * 1000
  const h = signatureHeaders(VECTOR.secret, VECTOR.id, VECTOR.timestamp, VECTOR.body)
  t.ok(verifyDelivery(VECTOR.secret, VECTOR.body, h, at + 299_000))
  t.notOk(verifyDelivery(VECTOR.secret, VECTOR.body, h, at + 301_000), 'stale')
  t.notOk(verifyDelivery(VECTOR.secret, VECTOR.body + ' ', h, at), 'body changed')
  t.notOk(verifyDelivery(VECTOR.secret, VECTOR.body, { ...h, 'webhook-id': 'msg_other' }, at), 'id changed')
  t.notOk(verifyDelivery(generateSecret(), VECTOR.body, h, at), 'another secret')
  // On the real clock, through the package's own verify().
  const now = Math.floor(Date.now() / 1000)
  const secret = generateSecret()
  t.ok(verifyDelivery(secret, VECTOR.body, signatureHeaders(secret, 'msg_1', now, VECTOR.body)))
  t.notOk(verifyDelivery(secret, VECTOR.body, signatureHeaders(secret, 'msg_1', now - 301, VECTOR.body)))
  // Key rotation: several space-separated signatures, any valid v1 passes.
  const sigs = [sign(generateSecret(), 'msg_1', now, VECTOR.body), sign(secret, 'msg_1', now, VECTOR.body)].join(' ')
  t.ok(verifyDelivery(secret, VECTOR.body, { 'webhook-id': 'msg_1', 'webhook-timestamp': String(now), 'webhook-signature': sigs }))
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
