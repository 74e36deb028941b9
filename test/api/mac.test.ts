// sql/vocabulary/mac.ts: the one-shot HMAC answers exactly what node:crypto's createHmac answers,
// for both algorithms, every encoding, keys shorter than, equal to and longer than the block,
// messages in several parts (strings as UTF-8, bytes), messages that outgrow its buffer, and
// calls after a long message (the buffer it keeps must not leak bytes into a shorter one).
import t from 'tap'
import { createHash, createHmac, randomBytes } from 'node:crypto'
import { createMac, sha256, type MacAlgorithm } from '../../sql/vocabulary/mac.js'

const ALGORITHMS: MacAlgorithm[] = ['sha1', 'sha256']
const reference = (alg: MacAlgorithm, key: Uint8Array, parts: Array<string | Uint8Array>): Buffer => {
  const h = createHmac(alg, key)
  for (const p of parts) h.update(p)
  return h.digest()
}

t.test('agrees with createHmac across keys, parts and lengths', async t => {
  const texts = ['', 'a', '+14165550123', 'é€😀 mixed ☎ text', 'x'.repeat(300), '€'.repeat(2_000), 'https://h/v1/webhooks/cpaas/voice?x=1CallSidCA1From+1']
  let checked = 0
  for (const alg of ALGORITHMS) {
    for (const keyLength of [0, 1, 20, 32, 63, 64, 65, 200]) {
      const key = randomBytes(keyLength)
      const mac = createMac(alg, key)
      for (const a of texts) {
        for (const parts of [[a], [randomBytes(32), a], [a, a.slice(1)], [Buffer.from(a), randomBytes(5)]]) {
          const want = reference(alg, key, parts)
          t.same(mac('buffer', ...parts), want)
          if (mac('hex', ...parts) !== want.toString('hex')) t.fail(`hex ${alg} key ${keyLength}`)
          if (mac('base64', ...parts) !== want.toString('base64')) t.fail(`base64 ${alg} key ${keyLength}`)
          if (mac('base64url', ...parts) !== want.toString('base64url')) t.fail(`base64url ${alg} key ${keyLength}`)
          checked++
        }
      }
    }
  }
  t.equal(checked, 2 * 8 * texts.length * 4)
})

t.test('a short message after a long one is not mixed with its leftovers', async t => {
  const key = randomBytes(32)
  const mac = createMac('sha256', key)
  mac('hex', 'z'.repeat(10_000))
  t.equal(mac('hex', 'ab'), createHmac('sha256', key).update('ab').digest('hex'))
  t.equal(mac('hex'), createHmac('sha256', key).digest('hex'), 'no parts: the MAC of the empty message')
})

t.test('two MACs keep their own keys', async t => {
  const k1 = randomBytes(32), k2 = randomBytes(32)
  const m1 = createMac('sha256', k1), m2 = createMac('sha256', k2)
  t.equal(m1('hex', 'same'), createHmac('sha256', k1).update('same').digest('hex'))
  t.equal(m2('hex', 'same'), createHmac('sha256', k2).update('same').digest('hex'))
  t.not(m1('hex', 'same'), m2('hex', 'same'))
})

t.test('sha256 is SHA-256 of the UTF-8 bytes', async t => {
  for (const s of ['', 'rk_live_00', 'é€😀']) t.same(sha256(s), createHash('sha256').update(s).digest())
  const b = randomBytes(100)
  t.same(sha256(b), createHash('sha256').update(b).digest())
})
