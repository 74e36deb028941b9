// Phone numbers at rest (DECISIONS 2): AES-256-GCM with a random IV, party hashes keyed through
// HKDF so a database copy alone cannot test guesses.
import t from 'tap'
import { createHmac, hkdfSync, randomBytes } from 'node:crypto'
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

