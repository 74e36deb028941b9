// Standard Webhooks signing (contract D6): `webhook-id`, `webhook-timestamp` (Unix seconds) and
// `webhook-signature: v1,<base64 HMAC-SHA256(key, "<id>.<timestamp>.<body>")>`, where the key is
// the base64 part of `whsec_<base64>`. `verify` is what a receiver runs; we use it in tests and
// document it for tenants.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto'

const SECRET_PREFIX = 'whsec_'
/** Receivers refuse timestamps further than this from their clock (Standard Webhooks: 5 minutes). */
const DEFAULT_TOLERANCE_SECONDS = 300

// A type alias, not an interface, so it is assignable to a plain header record.
export type SignatureHeaders = {
  'webhook-id': string
  'webhook-timestamp': string
  'webhook-signature': string
}

/** `whsec_` + base64 of 32 random bytes (Standard Webhooks allows 24 to 64). */
export function generateSecret(bytes = 32): string {
  if (bytes < 24 || bytes > 64) throw new RangeError('secret length must be 24..64 bytes')
  return SECRET_PREFIX + randomBytes(bytes).toString('base64')
}

/** The HMAC key: the base64 part after `whsec_` (a bare base64 secret is accepted too). */
export function secretKey(secret: string): Buffer {
  const b64 = secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(b64)) throw new TypeError('webhook secret is not base64')
  const key = Buffer.from(b64, 'base64')
  if (key.length === 0) throw new TypeError('webhook secret is empty')
  return key
}

function mac(key: Buffer, id: string, timestampSec: number, body: string): Buffer {
  return createHmac('sha256', key).update(`${id}.${timestampSec}.${body}`, 'utf8').digest()
}

/** `v1,<base64 signature>` for one message. */
export function sign(secret: string, id: string, timestampSec: number, body: string): string {
  return `v1,${mac(secretKey(secret), id, timestampSec, body).toString('base64')}`
}

export function signatureHeaders(secret: string, id: string, timestampSec: number, body: string): SignatureHeaders {
  return {
    'webhook-id': id,
    'webhook-timestamp': String(timestampSec),
    'webhook-signature': sign(secret, id, timestampSec, body),
  }
}

export type VerifyFailure = 'missing-headers' | 'bad-timestamp' | 'stale-timestamp' | 'bad-signature'

export interface VerifyOptions {
  /** Receiver clock in epoch milliseconds (tests pass a fixed one). */
  now?: number
  toleranceSeconds?: number
}

function header(headers: Record<string, string | string[] | undefined>, name: string): string | undefined {
  const v = headers[name] ?? headers[name.toLowerCase()]
  return Array.isArray(v) ? v[0] : v
}

/**
 * Checks a delivery the way a Standard Webhooks receiver does: timestamp within the tolerance,
 * then any of the space-separated `v1,` signatures matching, compared in constant time.
 */
export function verify(
  secret: string,
  body: string,
  headers: Record<string, string | string[] | undefined>,
  opts: VerifyOptions = {},
): { ok: true } | { ok: false; reason: VerifyFailure } {
  const id = header(headers, 'webhook-id')
  const ts = header(headers, 'webhook-timestamp')
  const sigs = header(headers, 'webhook-signature')
  if (!id || !ts || !sigs) return { ok: false, reason: 'missing-headers' }
  if (!/^\d{1,12}$/.test(ts)) return { ok: false, reason: 'bad-timestamp' }
  const timestampSec = Number(ts)
  const nowSec = Math.floor((opts.now ?? Date.now()) / 1000)
  if (Math.abs(nowSec - timestampSec) > (opts.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS)) {
    return { ok: false, reason: 'stale-timestamp' }
  }
  const expected = mac(secretKey(secret), id, timestampSec, body)
  for (const part of sigs.split(' ')) {
    const comma = part.indexOf(',')
    if (comma < 0 || part.slice(0, comma) !== 'v1') continue
    const given = Buffer.from(part.slice(comma + 1), 'base64')
    if (given.length === expected.length && timingSafeEqual(given, expected)) return { ok: true }
  }
  return { ok: false, reason: 'bad-signature' }
}
