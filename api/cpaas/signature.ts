// Provider callback signatures (contract D5), checked on the raw body before anything parses it.
//
// telnyx-ed25519: `telnyx-signature-ed25519` (base64, 64 bytes) over `"<telnyx-timestamp>|<raw body>"`,
//   timestamp (Unix seconds) within ±300 s. The public KeyObject is built once, at creation.
// hmac-sha1 (Twilio's algorithm): `x-twilio-signature` = base64 HMAC-SHA1(secret,
//   PUBLIC_BASE_URL + path + ('?' + query) + sorted name+value form pairs). For a JSON body there
//   are no form pairs and the query must carry `bodySHA256` (Twilio's JSON scheme) matching the
//   SHA-256 hex of the raw body.
// none: accepts everything; only legal with the sandbox provider (validateSignatureConfig).
//
// Results carry a reason code only: never the signature, the body or the secret.
import { createHmac, createPublicKey, hash, timingSafeEqual, verify as cryptoVerify, type KeyObject } from 'node:crypto'
import { createMac } from '../../sql/vocabulary/mac.js'
import { canonicalFormString, formPairs, type FormPair } from './form.js'

export type SignatureMode = 'telnyx-ed25519' | 'hmac-sha1' | 'none'
export type CpaasProviderKind = 'sandbox' | 'telnyx' | 'twilio'

export type VerifyFailure =
  | 'missing-signature'
  | 'missing-timestamp'
  | 'bad-timestamp'
  | 'stale-timestamp'
  | 'bad-signature'
  | 'bad-body'

export type VerifyResult = { ok: true } | { ok: false; reason: VerifyFailure }

export interface SignatureConfig {
  mode: SignatureMode
  /** TELNYX_PUBLIC_KEY: base64 of the raw 32-byte Ed25519 public key. */
  telnyxPublicKey?: string
  /** CPAAS_HMAC_SECRET. */
  hmacSecret?: string
  /** PUBLIC_BASE_URL, the origin (and optional path prefix) the provider was configured with; a
   * function is read per request (the service's listener URL is known once its port is bound). */
  publicBaseUrl: string | (() => string)
  toleranceSeconds?: number
  /** Epoch milliseconds. */
  now?: () => number
}

export interface SignedRequest {
  /** Lower-case header names. */
  headers: Readonly<Record<string, string>>
  rawBody: Buffer
  /** Request path as received, e.g. `/v1/webhooks/cpaas/voice/status`. */
  path: string
  /** Raw query string without `?` ('' when none), exactly as received. */
  query: string
  /** Already-parsed form fields. When absent, hmac-sha1 parses every pair from rawBody itself
   * (preferred: it also covers repeated names). */
  form?: Readonly<Record<string, string>>
  /** Every pair of the body as formPairs(rawBody) gave them (null: malformed), when the caller
   * parsed them already: hmac-sha1 signs them instead of parsing the body again. */
  pairs?: readonly FormPair[] | null
}

export interface SignatureVerifier {
  readonly mode: SignatureMode
  verify(req: SignedRequest): VerifyResult
}

const OK: VerifyResult = Object.freeze({ ok: true })
const fail = (reason: VerifyFailure): VerifyResult => ({ ok: false, reason })

// ASN.1 SubjectPublicKeyInfo header for an Ed25519 key (RFC 8410): SEQUENCE { SEQUENCE { OID
// 1.3.101.112 }, BIT STRING (33 bytes) }, followed by the 32 raw key bytes.
const ED25519_SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex')
const BASE64_RE = /^[A-Za-z0-9+/]+={0,2}$/

/** Builds the Ed25519 public KeyObject from TELNYX_PUBLIC_KEY. Throws (without echoing the value)
 * when it is not base64 of exactly 32 bytes. */
export function ed25519PublicKeyFromBase64(b64: string): KeyObject {
  const trimmed = b64.trim()
  const raw = BASE64_RE.test(trimmed) ? Buffer.from(trimmed, 'base64') : Buffer.alloc(0)
  if (raw.length !== 32) throw new Error('TELNYX_PUBLIC_KEY must be the base64 of a raw 32-byte Ed25519 public key')
  return createPublicKey({ key: Buffer.concat([ED25519_SPKI_PREFIX, raw]), format: 'der', type: 'spki' })
}

/** loadConfig calls this at boot (contract D1): `none` is refused unless the provider is the sandbox.
 * The message names the variables and their (non-secret) values only. */
export function validateSignatureConfig(provider: CpaasProviderKind, mode: SignatureMode): void {
  if (mode === 'none' && provider !== 'sandbox') {
    throw new Error(
      `CPAAS_SIGNATURE=none is refused with CPAAS_PROVIDER=${provider}: provider callbacks must be signature-checked ` +
        '(use telnyx-ed25519 with TELNYX_PUBLIC_KEY, or hmac-sha1 with CPAAS_HMAC_SECRET)',
    )
  }
}

/** The URL Twilio-style signing covers: base + path + ('?' + query). */
export function signedUrl(publicBaseUrl: string, path: string, query: string): string {
  const base = publicBaseUrl.endsWith('/') ? publicBaseUrl.slice(0, -1) : publicBaseUrl
  return base + path + (query ? '?' + query : '')
}

/** Twilio-style signature (base64 HMAC-SHA1) of a URL and form pairs. Exported for drivers/tests. */
export function hmacSha1Signature(secret: string, url: string, form: readonly FormPair[] | Readonly<Record<string, string>>): string {
  return createHmac('sha1', secret).update(url + canonicalFormString(form), 'utf8').digest('base64')
}

function decodeBase64(s: string | undefined, expectedBytes: number): Buffer | null {
  if (!s || s.length > 256 || !BASE64_RE.test(s)) return null
  const buf = Buffer.from(s, 'base64')
  return buf.length === expectedBytes ? buf : null
}

function bodySha256Param(query: string): string | null {
  if (!query.includes('bodySHA256=')) return null
  for (const part of query.split('&')) {
    if (part.startsWith('bodySHA256=')) return part.slice('bodySHA256='.length).toLowerCase()
  }
  return null
}

export function createSignatureVerifier(cfg: SignatureConfig): SignatureVerifier {
  const now = cfg.now ?? Date.now
  const tolerance = cfg.toleranceSeconds ?? 300

  if (cfg.mode === 'none') return { mode: 'none', verify: () => OK }

  if (cfg.mode === 'telnyx-ed25519') {
    if (!cfg.telnyxPublicKey) throw new Error('CPAAS_SIGNATURE=telnyx-ed25519 needs TELNYX_PUBLIC_KEY')
    const key = ed25519PublicKeyFromBase64(cfg.telnyxPublicKey)
    return {
      mode: 'telnyx-ed25519',
      verify(req) {
        const sigHeader = req.headers['telnyx-signature-ed25519']
        if (!sigHeader) return fail('missing-signature')
        const ts = req.headers['telnyx-timestamp']
        if (!ts) return fail('missing-timestamp')
        if (!/^\d{1,12}$/.test(ts)) return fail('bad-timestamp')
        if (Math.abs(now() / 1000 - Number(ts)) > tolerance) return fail('stale-timestamp')
        const sig = decodeBase64(sigHeader, 64)
        if (!sig) return fail('bad-signature')
        const signed = Buffer.concat([Buffer.from(ts + '|', 'latin1'), req.rawBody])
        return cryptoVerify(null, signed, key, sig) ? OK : fail('bad-signature')
      },
    }
  }

  if (cfg.mode === 'hmac-sha1') {
    if (!cfg.hmacSecret) throw new Error('CPAAS_SIGNATURE=hmac-sha1 needs CPAAS_HMAC_SECRET')
    // The key's pads computed once; no Hmac object per callback (sql/vocabulary/mac.ts).
    const mac = createMac('sha1', Buffer.from(cfg.hmacSecret, 'utf8'))
    return {
      mode: 'hmac-sha1',
      verify(req) {
        const header = req.headers['x-twilio-signature']
        if (!header) return fail('missing-signature')
        const sig = decodeBase64(header, 20)
        if (!sig) return fail('bad-signature')
        const isJson = (req.headers['content-type'] ?? '').toLowerCase().includes('json')
        let pairs: readonly FormPair[] | Readonly<Record<string, string>>
        if (isJson) {
          pairs = []
        } else if (req.pairs !== undefined) {
          if (req.pairs === null) return fail('bad-body')
          pairs = req.pairs
        } else if (req.form) {
          pairs = req.form
        } else {
          const parsed = formPairs(req.rawBody)
          if (!parsed) return fail('bad-body')
          pairs = parsed
        }
        const url = signedUrl(typeof cfg.publicBaseUrl === 'string' ? cfg.publicBaseUrl : cfg.publicBaseUrl(), req.path, req.query)
        const expected = mac('buffer', url, canonicalFormString(pairs))
        if (expected.length !== sig.length || !timingSafeEqual(expected, sig)) return fail('bad-signature')
        if (isJson) {
          // Without bodySHA256 a JSON body would be unsigned: refuse it.
          const want = bodySha256Param(req.query)
          if (want === null || want !== hash('sha256', req.rawBody, 'hex')) return fail('bad-body')
        }
        return OK
      },
    }
  }

  throw new Error('unknown CPAAS_SIGNATURE mode')
}
