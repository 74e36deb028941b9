// Phone number protection at rest (contract D2, D3). Real numbers are stored AES-256-GCM encrypted
// under PHONE_KEY; matching uses HMAC-SHA256 party hashes keyed by a key derived from PHONE_KEY
// with HKDF, so a copy of the database alone cannot brute-force the ~10^10 numbers of a country.
// Key objects are built once per factory call: encrypting, decrypting and hashing sit on hot paths.
//
// GCM is CTR mode plus a GHASH tag, so it can be written with one long-lived AES-ECB cipher (the
// counter blocks: native, AES-NI) and GHASH computed here (multiplications by the hash key H in
// GF(2^128)). Two paths use that (class Gcm), both reading and writing the very same format:
// - encrypt(): two per session create (agent and customer), one per target swap. Node's
//   createCipheriv costs ~5.9 µs and a native object per call, whose weak handle every young
//   generation collection then walks (bench/RESULTS.md, "What moved the figures", d01f2f6).
//   Its GHASH is constant-time (no branch or memory read depends on H or the data): a client
//   chooses the plaintext and can time the answer.
// - decryptPacked(): boot decrypts two numbers per live session (two million at a million
//   sessions) where one createDecipheriv round per number costs ~4.4 µs, ~9 s of a boot. The
//   counter blocks of a whole batch are encrypted by ONE ECB call and each number's tag is
//   recomputed with a 256 KiB table (~10× faster, its timing dependent on H and the data: for
//   data at rest this node reads itself, never for bytes a client submits). A number whose tag
//   does not match, or of an unusual length, goes through decrypt(), which decides (and throws)
//   exactly as before: the fast path can only ever accept what GCM accepts.
// decrypt() stays Node's own: it is the path for anything read one at a time.
import {
  createCipheriv, createDecipheriv, createSecretKey, hkdfSync, randomFillSync, type Cipher, type KeyObject,
} from 'node:crypto'
import { createMac } from './vocabulary/mac.js'

const IV_BYTES = 12
const TAG_BYTES = 16
const BLOCK = 16

export interface PhoneCipher {
  /** iv (12 bytes) ‖ ciphertext ‖ GCM tag (16 bytes). */
  encrypt(e164: string): Buffer
  decrypt(buf: Buffer): string
  /**
   * What decrypt() gives for each of `count` ciphertexts packed end to end: item i is
   * packed[ends[i-1] ?? 0, ends[i]). Throws as decrypt() does on the first one that fails.
   */
  decryptPacked(packed: Buffer, ends: ArrayLike<number>, count: number): string[]
}

function requireKey(key: Buffer, what: string): void {
  if (!Buffer.isBuffer(key) || key.length !== 32) throw new Error(`${what} must be 32 bytes`)
}

export function createPhoneCipher(key32: Buffer): PhoneCipher {
  requireKey(key32, 'PHONE_KEY')
  const key = createSecretKey(Buffer.from(key32))
  const decrypt = (buf: Buffer): string => {
    if (buf.length < IV_BYTES + TAG_BYTES) throw new Error('phone ciphertext too short')
    const d = createDecipheriv('aes-256-gcm', key, buf.subarray(0, IV_BYTES))
    d.setAuthTag(buf.subarray(buf.length - TAG_BYTES))
    return Buffer.concat([d.update(buf.subarray(IV_BYTES, buf.length - TAG_BYTES)), d.final()]).toString('utf8')
  }
  let gcm: Gcm | null = null // built on first use (and its 256 KiB table only for decryptPacked)
  return {
    encrypt: text => (gcm ??= new Gcm(key)).encrypt(text),
    decrypt,
    decryptPacked: (packed, ends, count) => decryptPacked(gcm ??= new Gcm(key), decrypt, packed, ends, count),
  }
}

/**
 * PhoneCipher#decryptPacked with the fallback given for what the fast path does not accept (its
 * test passes one that throws, to see the fast path accept every genuine number on its own).
 */
export function decryptPackedWith(
  key32: Buffer, packed: Buffer, ends: ArrayLike<number>, count: number, fallback: (buf: Buffer) => string,
): string[] {
  requireKey(key32, 'PHONE_KEY')
  return decryptPacked(new Gcm(createSecretKey(Buffer.from(key32))), fallback, packed, ends, count)
}

/** AES-256-GCM with a 96-bit IV and no associated data, as OpenSSL computes it (SP 800-38D). */
class Gcm {
  private readonly ecb: Cipher
  /** H·x^i for i = 0 … 127, four big-endian 32-bit words each: the constant-time multiplication. */
  private readonly basis: Int32Array
  private lookup: Int32Array | null = null
  /** GHASH's running value Y, as four big-endian 32-bit words. */
  private readonly y = new Int32Array(4)
  /** Random IVs drawn from the CSPRNG a few hundred at a time. */
  private readonly ivs = Buffer.alloc(IV_BYTES * 512)
  private ivAt = this.ivs.length
  private counters = Buffer.alloc(BLOCK * 4)

  constructor(key: KeyObject) {
    this.ecb = createCipheriv('aes-256-ecb', key, null)
    this.ecb.setAutoPadding(false)
    this.basis = ghashBasis(this.aes(Buffer.alloc(BLOCK)))
  }

  /** H times each byte value at each of the 16 positions: decryptPacked's multiplication by table. */
  get table(): Int32Array {
    return this.lookup ??= ghashTable(this.basis)
  }

  /** AES of whole blocks. ECB keeps no state between blocks, so one cipher object serves every call. */
  aes(blocks: Buffer): Buffer {
    return this.ecb.update(blocks)
  }

  /** iv ‖ ciphertext ‖ tag, what createCipheriv('aes-256-gcm') with a random 12-byte IV gives. */
  encrypt(text: string): Buffer {
    const n = Buffer.byteLength(text, 'utf8')
    const out = Buffer.allocUnsafe(IV_BYTES + n + TAG_BYTES)
    if (this.ivAt === this.ivs.length) { randomFillSync(this.ivs); this.ivAt = 0 }
    this.ivs.copy(out, 0, this.ivAt, this.ivAt += IV_BYTES)
    // Counter blocks IV ‖ 1 (J0, which masks the tag), then IV ‖ 2, IV ‖ 3, … for the text.
    const blocks = Math.ceil(n / BLOCK) + 1
    if (this.counters.length < blocks * BLOCK) this.counters = Buffer.alloc(blocks * BLOCK)
    const counters = this.counters.subarray(0, blocks * BLOCK)
    for (let b = 0; b < blocks; b++) {
      out.copy(counters, b * BLOCK, 0, IV_BYTES)
      counters.writeUInt32BE(b + 1, b * BLOCK + IV_BYTES)
    }
    const stream = this.aes(counters)
    out.write(text, IV_BYTES, 'utf8')
    for (let j = 0; j < n; j++) out[IV_BYTES + j]! ^= stream[BLOCK + j]!
    this.ghash(out, IV_BYTES, n)
    const tag = IV_BYTES + n
    for (let w = 0; w < 4; w++) out.writeInt32BE(this.y[w]! ^ stream.readInt32BE(4 * w), tag + 4 * w)
    return out
  }

  /** Y ← GHASH of the ciphertext buf[at, at + n) (no associated data) and its length block. */
  private ghash(buf: Buffer, at: number, n: number): void {
    const y = this.y
    y.fill(0)
    for (let p = 0; p < n; p += BLOCK) { // Y ← (Y ⊕ X)·H, X the next ≤ 16 bytes, zero-padded
      const len = Math.min(BLOCK, n - p)
      for (let q = 0; q < len; q++) y[q >> 2] = y[q >> 2]! ^ (buf[at + p + q]! << (24 - 8 * (q & 3)))
      this.mulH()
    }
    y[3] = y[3]! ^ (8 * n) // the length block 0^64 ‖ [8n]_64, for n < 2^29
    this.mulH()
  }

  /**
   * Y ← Y·H in GF(2^128), in constant time: the XOR of H·x^i over Y's set bits i, each term masked
   * rather than chosen, so neither the branches nor the memory reads depend on Y or H.
   */
  private mulH(): void {
    const b = this.basis
    const y = this.y
    let z0 = 0, z1 = 0, z2 = 0, z3 = 0
    for (let w = 0; w < 4; w++) {
      const x = y[w]!
      for (let j = 0; j < 32; j++) {
        const m = -((x >>> (31 - j)) & 1)
        const k = (w * 32 + j) * 4
        z0 ^= b[k]! & m; z1 ^= b[k + 1]! & m; z2 ^= b[k + 2]! & m; z3 ^= b[k + 3]! & m
      }
    }
    y[0] = z0; y[1] = z1; y[2] = z2; y[3] = z3
  }
}

/**
 * H·x^i for i = 0 … 127 (bit i of a block is bit 7 - i % 8 of its byte i / 8): SP 800-38D,
 * algorithm 1, where V ← V·x is a right shift with the reduction 0xE1 ‖ 0^120.
 */
function ghashBasis(h: Buffer): Int32Array {
  const basis = new Int32Array(128 * 4)
  let v0 = h.readInt32BE(0), v1 = h.readInt32BE(4), v2 = h.readInt32BE(8), v3 = h.readInt32BE(12)
  for (let i = 0; i < 128; i++) {
    basis[4 * i] = v0; basis[4 * i + 1] = v1; basis[4 * i + 2] = v2; basis[4 * i + 3] = v3
    const reduce = -(v3 & 1) & 0xe1000000
    v3 = (v3 >>> 1) | (v2 << 31)
    v2 = (v2 >>> 1) | (v1 << 31)
    v1 = (v1 >>> 1) | (v0 << 31)
    v0 = (v0 >>> 1) ^ reduce
  }
  return basis
}

/**
 * Multiplication by H is linear, so X·H is the XOR over the 16 bytes of X of (that byte alone, at
 * its position)·H: 16 × 256 precomputed products, each the XOR of the basis rows of its set bits.
 */
function ghashTable(basis: Int32Array): Int32Array {
  const table = new Int32Array(16 * 256 * 4)
  for (let pos = 0; pos < 16; pos++) {
    for (let b = 1; b < 256; b++) {
      const at = (pos * 256 + b) * 4
      for (let j = 0; j < 8; j++) {
        if ((b & (0x80 >> j)) === 0) continue
        const bit = (pos * 8 + j) * 4
        for (let w = 0; w < 4; w++) table[at + w] = table[at + w]! ^ basis[bit + w]!
      }
    }
  }
  return table
}

function decryptPacked(
  gcm: Gcm, decrypt: (buf: Buffer) => string, packed: Buffer, ends: ArrayLike<number>, count: number,
): string[] {
  const t = gcm.table
  // Per item two counter blocks: J0 = IV ‖ 1 (masks the tag) and IV ‖ 2 (the keystream of the
  // number's one block); items the fast path cannot take keep zero blocks and go to decrypt().
  // Byte loops rather than Buffer#copy/readUInt32BE: a dozen bytes cost less than the calls.
  const counters = Buffer.alloc(count * 2 * BLOCK)
  for (let i = 0, start = 0; i < count; start = ends[i]!, i++) {
    const len = ends[i]! - start
    if (len <= IV_BYTES + TAG_BYTES || len > IV_BYTES + BLOCK + TAG_BYTES) continue
    const at = i * 2 * BLOCK
    for (let j = 0; j < IV_BYTES; j++) counters[at + j] = counters[at + BLOCK + j] = packed[start + j]!
    counters[at + 15] = 1
    counters[at + BLOCK + 15] = 2
  }
  const stream = gcm.aes(counters)
  const out = new Array<string>(count)
  const plain = Buffer.alloc(BLOCK)
  for (let i = 0, start = 0; i < count; start = ends[i]!, i++) {
    const end = ends[i]!
    const n = end - start - IV_BYTES - TAG_BYTES
    if (n <= 0 || n > BLOCK) {
      out[i] = decrypt(packed.subarray(start, end))
      continue
    }
    // GHASH of one ciphertext block C (zero-padded) and the length block L = 0^64 ‖ [8n]_64:
    // S = ((C·H) ⊕ L)·H, and the tag is E(J0) ⊕ S. Zero bytes contribute nothing (row 0 is 0).
    const c = start + IV_BYTES
    let z0 = 0, z1 = 0, z2 = 0, z3 = 0
    for (let p = 0; p < n; p++) {
      const k = (p * 256 + packed[c + p]!) * 4
      z0 ^= t[k]!; z1 ^= t[k + 1]!; z2 ^= t[k + 2]!; z3 ^= t[k + 3]!
    }
    const x0 = z0, x1 = z1, x2 = z2, x3 = z3 ^ (8 * n)
    z0 = 0; z1 = 0; z2 = 0; z3 = 0
    for (let p = 0; p < 16; p++) {
      const w = p < 4 ? x0 : p < 8 ? x1 : p < 12 ? x2 : x3
      const k = (p * 256 + ((w >>> (24 - 8 * (p & 3))) & 255)) * 4
      z0 ^= t[k]!; z1 ^= t[k + 1]!; z2 ^= t[k + 2]!; z3 ^= t[k + 3]!
    }
    const at = i * 2 * BLOCK
    if ((z0 ^ word(stream, at) ^ word(packed, end - 16)) !== 0 || (z1 ^ word(stream, at + 4) ^ word(packed, end - 12)) !== 0 ||
      (z2 ^ word(stream, at + 8) ^ word(packed, end - 8)) !== 0 || (z3 ^ word(stream, at + 12) ^ word(packed, end - 4)) !== 0) {
      out[i] = decrypt(packed.subarray(start, end)) // not what GCM accepts: decrypt() throws
      continue
    }
    for (let j = 0; j < n; j++) plain[j] = packed[c + j]! ^ stream[at + BLOCK + j]!
    out[i] = plain.toString('utf8', 0, n)
  }
  return out
}

/** The big-endian 32-bit word at `at`, as a signed int (compared by XOR, so the sign is moot). */
function word(b: Buffer, at: number): number {
  return (b[at]! << 24) | (b[at + 1]! << 16) | (b[at + 2]! << 8) | b[at + 3]!
}

function hkdf(serverKey: Buffer, info: string): Buffer {
  return Buffer.from(hkdfSync('sha256', serverKey, Buffer.alloc(0), info, 32))
}

export type PartyHasher = (salt: Buffer, e164: string) => string

/** contract D2: hex HMAC-SHA256(HKDF(PHONE_KEY, 'maskline party hash'), salt ‖ e164). */
export function createPartyHasher(phoneKey: Buffer): PartyHasher {
  requireKey(phoneKey, 'PHONE_KEY')
  const mac = createMac('sha256', hkdf(phoneKey, 'maskline party hash'))
  return (salt, e164) => mac('hex', salt, e164)
}
