// API credentials (contract 5.5, contract D3): apiKey `rk_live_` + 48 hex, stored as SHA-256 (the
// lookup key); apiSecret `rs_` + 64 hex, stored as HMAC-SHA256 under a server key derived from
// PHONE_KEY (256 random bits need no slow hash, and a database copy alone cannot test guesses).
import { hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto'
import { createMac, sha256, type Mac } from '../../sql/vocabulary/mac.js'

export function newApiKey(): string {
  return `rk_live_${randomBytes(24).toString('hex')}`
}

export function newApiSecret(): string {
  return `rs_${randomBytes(32).toString('hex')}`
}

export function apiKeyHash(apiKey: string): Buffer {
  return sha256(apiKey)
}

const macs = new WeakMap<Buffer, Mac>()

/**
 * HKDF-derived, so the phone key itself never MACs anything; made once per phone key (a token
 * exchange then costs one HMAC, without a key import or an Hmac object: sql/vocabulary/mac.ts).
 */
function secretMac(phoneKey: Buffer): Mac {
  let m = macs.get(phoneKey)
  if (!m) {
    m = createMac('sha256', Buffer.from(hkdfSync('sha256', phoneKey, Buffer.alloc(0), 'maskline api-secret mac v1', 32)))
    macs.set(phoneKey, m)
  }
  return m
}

export function apiSecretMac(phoneKey: Buffer, apiSecret: string): Buffer {
  return secretMac(phoneKey)('buffer', apiSecret)
}

/** Constant time: timingSafeEqual over two SHA-256 digests (their lengths checked first, contract D3). */
export function secretMatches(phoneKey: Buffer, apiSecret: string, storedMac: Buffer): boolean {
  const mac = apiSecretMac(phoneKey, apiSecret)
  return mac.length === storedMac.length && timingSafeEqual(mac, storedMac)
}

/** A new pair and what is stored of it. */
export function newCredentials(phoneKey: Buffer): { apiKey: string; apiSecret: string; keyHash: Buffer; secretMac: Buffer } {
  const apiKey = newApiKey()
  const apiSecret = newApiSecret()
  return { apiKey, apiSecret, keyHash: apiKeyHash(apiKey), secretMac: apiSecretMac(phoneKey, apiSecret) }
}
