// Phone number protection at rest (DECISIONS 2, 3). Real numbers are stored AES-256-GCM encrypted
// under PHONE_KEY; matching uses HMAC-SHA256 party hashes keyed by a key derived from PHONE_KEY
// with HKDF, so a copy of the database alone cannot brute-force the ~10^10 numbers of a country.
// Key objects are built once per factory call: encrypting, decrypting and hashing sit on hot paths.
//
// Boot decrypts two numbers per live session (two million at a million sessions), and one
// createDecipheriv round per number costs ~4.4 µs: ~9 s of a boot. decryptPacked() reads the very
// same format in bulk: GCM is CTR mode plus a GHASH tag, so the counter blocks of a whole batch
// are encrypted by ONE AES-ECB call (native, AES-NI) and the tag of each number is recomputed
// here (a number is one block, so GHASH is two multiplications by the hash key H, table-driven).
// A number whose tag does not match, or of an unusual length, goes through decrypt(), which
// decides (and throws) exactly as before: the fast path can only ever accept what GCM accepts.
// The tables make GHASH's timing depend on H and the data, so decryptPacked() is for data at rest
// this node reads itself (boot), never for ciphertext a client can submit and time.
import {
  createCipheriv, createDecipheriv, createSecretKey, hkdfSync, randomBytes, type KeyObject,
} from 'node:crypto'
import { createMac } from '../api/vocabulary/mac.js'

const IV_BYTES = 12
const TAG_BYTES = 16

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
  let ghash: Uint32Array | null = null // built on first use: most processes never boot-load
  return {
    encrypt(e164) {
      const iv = randomBytes(IV_BYTES)
      const c = createCipheriv('aes-256-gcm', key, iv)
      const body = Buffer.concat([c.update(e164, 'utf8'), c.final()])
      return Buffer.concat([iv, body, c.getAuthTag()])
    },
    decrypt,
    decryptPacked(packed, ends, count) {
      ghash ??= ghashTable(ecb(key, Buffer.alloc(BLOCK)))
      return decryptPacked(key, ghash, decrypt, packed, ends, count)
    },
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
  const key = createSecretKey(Buffer.from(key32))
  return decryptPacked(key, ghashTable(ecb(key, Buffer.alloc(BLOCK))), fallback, packed, ends, count)
}

const BLOCK = 16

function ecb(key: KeyObject, blocks: Buffer): Buffer {
  const c = createCipheriv('aes-256-ecb', key, null)
  c.setAutoPadding(false)
  return c.update(blocks) // ECB keeps no state between blocks: no final() needed for whole blocks
}

/**
 * Multiplication by H in GF(2^128) (GCM's bit order) is linear, so X·H is the XOR over the 16
 * bytes of X of (that byte alone, at its position)·H: 16 × 256 precomputed products, each as four
 * big-endian 32-bit words. Built from the 128 products (single bit i)·H = H·x^i (SP 800-38D,
 * algorithm 1: V ← V·x is a right shift with the reduction 0xE1 ‖ 0^120).
 */
function ghashTable(h: Buffer): Uint32Array {
  const basis = new Uint32Array(128 * 4)
  let v0 = h.readUInt32BE(0), v1 = h.readUInt32BE(4), v2 = h.readUInt32BE(8), v3 = h.readUInt32BE(12)
  for (let i = 0; i < 128; i++) {
    basis[4 * i] = v0; basis[4 * i + 1] = v1; basis[4 * i + 2] = v2; basis[4 * i + 3] = v3
    const lsb = v3 & 1
    v3 = ((v3 >>> 1) | (v2 << 31)) >>> 0
    v2 = ((v2 >>> 1) | (v1 << 31)) >>> 0
    v1 = ((v1 >>> 1) | (v0 << 31)) >>> 0
    v0 = ((v0 >>> 1) ^ (lsb ? 0xe1000000 : 0)) >>> 0
  }
  const table = new Uint32Array(16 * 256 * 4)
  for (let pos = 0; pos < 16; pos++) {
    for (let b = 1; b < 256; b++) {
      const at = (pos * 256 + b) * 4
      for (let j = 0; j < 8; j++) {
        if ((b & (0x80 >> j)) === 0) continue
        const bit = (pos * 8 + j) * 4
        for (let w = 0; w < 4; w++) table[at + w] = (table[at + w]! ^ basis[bit + w]!) >>> 0
      }
    }
  }
  return table
}

function decryptPacked(
  key: KeyObject, t: Uint32Array, decrypt: (buf: Buffer) => string, packed: Buffer, ends: ArrayLike<number>, count: number,
): string[] {
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
  const stream = ecb(key, counters)
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

/** DECISIONS 2: hex HMAC-SHA256(HKDF(PHONE_KEY, 'maskline party hash'), salt ‖ e164). */
export function createPartyHasher(phoneKey: Buffer): PartyHasher {
  requireKey(phoneKey, 'PHONE_KEY')
  const mac = createMac('sha256', hkdf(phoneKey, 'maskline party hash'))
  return (salt, e164) => mac('hex', salt, e164)
}
