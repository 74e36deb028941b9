// Phone number protection at rest (DECISIONS 2, 3). Real numbers are stored AES-256-GCM encrypted
// under PHONE_KEY; matching uses HMAC-SHA256 party hashes keyed by a key derived from PHONE_KEY
// with HKDF, so a copy of the database alone cannot brute-force the ~10^10 numbers of a country.
// Key objects are built once per factory call: encrypting, decrypting and hashing sit on hot paths.
import {
  createCipheriv, createDecipheriv, createHmac, createSecretKey, hkdfSync, randomBytes, type KeyObject,
} from 'node:crypto'

const IV_BYTES = 12
const TAG_BYTES = 16

export interface PhoneCipher {
  /** iv (12 bytes) ‖ ciphertext ‖ GCM tag (16 bytes). */
  encrypt(e164: string): Buffer
  decrypt(buf: Buffer): string
}

function requireKey(key: Buffer, what: string): void {
  if (!Buffer.isBuffer(key) || key.length !== 32) throw new Error(`${what} must be 32 bytes`)
}

export function createPhoneCipher(key32: Buffer): PhoneCipher {
  requireKey(key32, 'PHONE_KEY')
  const key = createSecretKey(Buffer.from(key32))
  return {
    encrypt(e164) {
      const iv = randomBytes(IV_BYTES)
      const c = createCipheriv('aes-256-gcm', key, iv)
      const body = Buffer.concat([c.update(e164, 'utf8'), c.final()])
      return Buffer.concat([iv, body, c.getAuthTag()])
    },
    decrypt(buf) {
      if (buf.length < IV_BYTES + TAG_BYTES) throw new Error('phone ciphertext too short')
      const d = createDecipheriv('aes-256-gcm', key, buf.subarray(0, IV_BYTES))
      d.setAuthTag(buf.subarray(buf.length - TAG_BYTES))
      return Buffer.concat([d.update(buf.subarray(IV_BYTES, buf.length - TAG_BYTES)), d.final()]).toString('utf8')
    },
  }
}

function deriveKey(serverKey: Buffer, info: string): KeyObject {
  return createSecretKey(Buffer.from(hkdfSync('sha256', serverKey, Buffer.alloc(0), info, 32)))
}

export type PartyHasher = (salt: Buffer, e164: string) => string

/** DECISIONS 2: hex HMAC-SHA256(HKDF(PHONE_KEY, 'maskline party hash'), salt ‖ e164). */
export function createPartyHasher(phoneKey: Buffer): PartyHasher {
  requireKey(phoneKey, 'PHONE_KEY')
  const key = deriveKey(phoneKey, 'maskline party hash')
  return (salt, e164) => createHmac('sha256', key).update(salt).update(e164, 'utf8').digest('hex')
}

/**
 * DECISIONS 3: the apiSecret is stored as HMAC-SHA256 under a key derived from the server key.
 * One implementation only: api/auth/credentials.ts owns it (token exchange verifies with it).
 */
export { apiSecretMac as secretMac } from '../api/auth/credentials.js'
