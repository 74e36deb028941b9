// Twilio-shaped credentials of a tenant (docs/twilio-proxy.md): an account SID `AC` + 32 hex and
// an auth token of 32 hex digits, shown once. The token is kept as an HMAC under a key derived
// from PHONE_KEY (what a request is checked against) and AES-256-GCM encrypted under another
// derived key (outgoing callbacks are signed with it, as Twilio signs with the auth token).
import { hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto'
import { createMac, type Mac } from '../../sql/vocabulary/mac.js'
import { createPhoneCipher, type PhoneCipher } from '../../sql/crypto.js'

const derive = (phoneKey: Buffer, label: string) => Buffer.from(hkdfSync('sha256', phoneKey, Buffer.alloc(0), label, 32))

const macs = new WeakMap<Buffer, Mac>()
const ciphers = new WeakMap<Buffer, PhoneCipher>()

function tokenMacOf(phoneKey: Buffer): Mac {
  let m = macs.get(phoneKey)
  if (!m) macs.set(phoneKey, (m = createMac('sha256', derive(phoneKey, 'maskline twilio auth-token mac v1'))))
  return m
}

export function tokenCipher(phoneKey: Buffer): PhoneCipher {
  let c = ciphers.get(phoneKey)
  if (!c) ciphers.set(phoneKey, (c = createPhoneCipher(derive(phoneKey, 'maskline twilio auth-token v1'))))
  return c
}

export function newAccountSid(): string {
  return `AC${randomBytes(16).toString('hex')}`
}

export function newApiKeySid(): string {
  return `SK${randomBytes(16).toString('hex')}`
}

export function newAuthToken(): string {
  return randomBytes(16).toString('hex')
}

export function tokenMac(phoneKey: Buffer, token: string): Buffer {
  return tokenMacOf(phoneKey)('buffer', token)
}

/** Constant time over two digests. */
export function tokenMatches(phoneKey: Buffer, token: string, stored: Buffer): boolean {
  const mac = tokenMac(phoneKey, token)
  return mac.length === stored.length && timingSafeEqual(mac, stored)
}
