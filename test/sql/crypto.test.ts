// Phone numbers at rest (contract D2): AES-256-GCM with a random IV, party hashes keyed through
// HKDF so a database copy alone cannot test guesses.
import t from 'tap'
import { createCipheriv, createHmac, hkdfSync, randomBytes } from 'node:crypto'
import { createPartyHasher, createPhoneCipher } from '../../sql/crypto.js'

const key = randomBytes(32)

t.test('phone cipher: round trip, fresh IV each time, tampering detected', async t => {
  const c = createPhoneCipher(key)
  const a = c.encrypt('+14165550123')
  const b = c.encrypt('+14165550123')
  t.equal(a.length, 12 + 12 + 16, 'iv ‖ ciphertext ‖ tag')
  t.not(a.toString('hex'), b.toString('hex'), 'random IV')
  t.equal(c.decrypt(a), '+14165550123')
  t.notOk(a.toString('latin1').includes('4165550123'), 'no plaintext digits')
  const tampered = Buffer.from(a)
  tampered[14]! ^= 1
  t.throws(() => c.decrypt(tampered))
  t.throws(() => createPhoneCipher(randomBytes(32)).decrypt(a), 'another key cannot read it')
  t.throws(() => c.decrypt(Buffer.alloc(10)))
  t.throws(() => createPhoneCipher(randomBytes(16)), /32 bytes/)
})

t.test('encrypt writes, byte for byte, what OpenSSL AES-256-GCM writes under the same IV', async t => {
  // encrypt() computes GCM itself around one long-lived AES-ECB cipher (sql/crypto.ts, class Gcm):
  // every length from empty to several blocks, with 2- and 3-byte characters, is compared with
  // createCipheriv('aes-256-gcm') given the IV encrypt() drew.
  const c = createPhoneCipher(key)
  const texts = ['', '+14165550123', '+999999999999999', 'é', '€uro', 'whsec_' + 'K9'.repeat(30)]
  for (let n = 1; n <= 70; n++) texts.push('x'.repeat(n), 'é'.repeat(n >> 1) + 'y'.repeat(n & 1))
  let same = 0
  for (const text of texts) {
    const got = c.encrypt(text)
    const iv = got.subarray(0, 12)
    const node = createCipheriv('aes-256-gcm', key, iv)
    const want = Buffer.concat([iv, node.update(text, 'utf8'), node.final(), node.getAuthTag()])
    if (got.equals(want) && c.decrypt(got) === text) same++
    else t.fail(`differs for ${JSON.stringify(text)}`)
  }
  t.equal(same, texts.length, `${texts.length} texts, 0 to ${Math.max(...texts.map(x => Buffer.byteLength(x)))} bytes`)
})

t.test('encrypt draws a fresh IV every time, past a refill of its random pool', async t => {
  const c = createPhoneCipher(key)
  const ivs = new Set<string>()
  for (let i = 0; i < 2_000; i++) ivs.add(c.encrypt('+14165550123').subarray(0, 12).toString('hex'))
  t.equal(ivs.size, 2_000)
})

t.test('party hash: HMAC-SHA256 under HKDF(PHONE_KEY) over salt ‖ number, hex', async t => {
  const hash = createPartyHasher(key)
  const salt = randomBytes(32)
  const derived = Buffer.from(hkdfSync('sha256', key, Buffer.alloc(0), 'maskline party hash', 32))
  const expected = createHmac('sha256', derived).update(Buffer.concat([salt, Buffer.from('+14165550123')])).digest('hex')
  t.equal(hash(salt, '+14165550123'), expected)
  t.equal(hash(salt, '+14165550123'), expected, 'deterministic')
  t.not(hash(randomBytes(32), '+14165550123'), expected, 'per-tenant salt')
  t.not(createPartyHasher(randomBytes(32))(salt, '+14165550123'), expected, 'keyed: the salt alone is not enough')
  t.not(createHmac('sha256', key).update(Buffer.concat([salt, Buffer.from('+14165550123')])).digest('hex'), expected, 'not keyed by PHONE_KEY itself')
})

