// The boot's bulk decryption (sql/crypto.ts decryptPacked): the same format and the same answers
// as decrypt(), number by number, with GCM's tag still checked. The fast path (one AES-ECB call per
// batch, GHASH recomputed here) is checked on its own through decryptPackedWith with a fallback
// that throws: it must accept every genuine number and refuse every altered one.
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { createPhoneCipher, decryptPackedWith } from '../../sql/crypto.js'

const key = randomBytes(32)
const cipher = createPhoneCipher(key)

function pack(bufs: Buffer[]): { packed: Buffer; ends: number[] } {
  const ends: number[] = []
  let end = 0
  for (const b of bufs) ends.push(end += b.length)
  return { packed: Buffer.concat(bufs), ends }
}

const refuse = (): string => { throw new Error('fast path refused it') }

t.test('every genuine number, 1 to 16 bytes, is read by the fast path alone, as decrypt() reads it', async t => {
  const plain: string[] = []
  for (let i = 0; i < 4_000; i++) {
    const digits = 7 + (i % 9) // E.164: + and 7 to 15 digits
    plain.push('+' + String(1 + (i % 9)) + String(i * 7_919 + 1_000_000_000_000_000).slice(-(digits - 1)))
  }
  // Every length in bytes from 1 to 16, with and without a 2-byte character.
  for (let n = 1; n <= 16; n++) plain.push('9'.repeat(n), ...(n >= 2 ? ['9'.repeat(n - 2) + 'é'] : []))
  const bufs = plain.map(p => cipher.encrypt(p))
  const { packed, ends } = pack(bufs)
  const fast = decryptPackedWith(key, packed, ends, bufs.length, refuse)
  t.same(fast, plain)
  t.same(cipher.decryptPacked(packed, ends, bufs.length), bufs.map(b => cipher.decrypt(b)))
})

t.test('what the fast path does not take goes to decrypt(): empty, longer than a block', async t => {
  const plain = ['', 'x'.repeat(17), '+14165550123', 'metadata-sized text '.repeat(10)]
  const bufs = plain.map(p => cipher.encrypt(p))
  const { packed, ends } = pack(bufs)
  t.same(cipher.decryptPacked(packed, ends, bufs.length), plain)
  const slow: number[] = []
  decryptPackedWith(key, packed, ends, bufs.length, b => { slow.push(b.length); return cipher.decrypt(b) })
  t.same(slow, [28, 45, 28 + 200], 'only the empty one and those over 16 bytes')
})

t.test('any altered bit of IV, ciphertext or tag is refused by the fast path, and decryptPacked throws', async t => {
  const good = cipher.encrypt('+447700900123')
  const other = cipher.encrypt('+14165550123')
  let refused = 0
  for (let bit = 0; bit < good.length * 8; bit++) {
    const bad = Buffer.from(good)
    bad[bit >> 3]! ^= 0x80 >> (bit & 7)
    const { packed, ends } = pack([other, bad, other])
    t.throws(() => decryptPackedWith(key, packed, ends, 3, refuse), /fast path refused/)
    t.throws(() => cipher.decryptPacked(packed, ends, 3), `bit ${bit}`)
    refused++
  }
  t.equal(refused, good.length * 8)
  const { packed, ends } = pack([good])
  t.throws(() => createPhoneCipher(randomBytes(32)).decryptPacked(packed, ends, 1), 'another key cannot read it')
  t.throws(() => cipher.decryptPacked(Buffer.alloc(10), [10], 1), 'too short')
})

t.test('count and ends select the items: a prefix of the buffer, none at all', async t => {
  const bufs = ['+14165550100', '+14165550101', '+14165550102'].map(p => cipher.encrypt(p))
  const { packed, ends } = pack(bufs)
  t.same(cipher.decryptPacked(packed, ends, 2), ['+14165550100', '+14165550101'])
  t.same(cipher.decryptPacked(packed, [], 0), [])
})
