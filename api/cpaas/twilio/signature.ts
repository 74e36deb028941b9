// Twilio's webhook signature (X-Twilio-Signature), checked with the official SDK's own
// `validateRequest`: base64 HMAC-SHA1 keyed with the account's Auth Token over the URL Twilio
// requested (the public URL it was configured with, query included) followed by every form
// parameter, sorted by name, as name + value. validateRequest also accepts the URL with the
// default port added or removed, as Twilio may sign either.
//
// Only form bodies are accepted: Twilio's voice and messaging webhooks are forms. Results carry a
// reason code only: never the signature, the body or the token.
import twilio from 'twilio'
import { formPairs, type FormPair } from '../form.js'
import { signedUrl, type SignatureVerifier, type SignedRequest, type VerifyResult } from '../signature.js'

export interface TwilioVerifierOptions {
  /** TWILIO_AUTH_TOKEN: Twilio signs every webhook of the account with it. */
  authToken: string
  /** PUBLIC_BASE_URL, read per request (see SignatureConfig.publicBaseUrl). */
  publicBaseUrl: string | (() => string)
}

const OK: VerifyResult = Object.freeze({ ok: true })

/** Form pairs → validateRequest's params (a repeated name becomes an array, as Express parses it). */
function params(pairs: readonly FormPair[]): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = Object.create(null) as Record<string, string | string[]>
  for (const [name, value] of pairs) {
    const had = out[name]
    out[name] = had === undefined ? value : Array.isArray(had) ? [...had, value] : [had, value]
  }
  return out
}

export function createTwilioVerifier(opts: TwilioVerifierOptions): SignatureVerifier {
  if (!opts.authToken) throw new Error('the Twilio webhook verifier needs TWILIO_AUTH_TOKEN')
  const base = typeof opts.publicBaseUrl === 'string' ? () => opts.publicBaseUrl as string : opts.publicBaseUrl
  return {
    mode: 'hmac-sha1',
    verify(req: SignedRequest): VerifyResult {
      const header = req.headers['x-twilio-signature']
      if (!header) return { ok: false, reason: 'missing-signature' }
      if (!(req.headers['content-type'] ?? '').toLowerCase().startsWith('application/x-www-form-urlencoded')) return { ok: false, reason: 'bad-body' }
      const pairs = req.pairs !== undefined ? req.pairs : formPairs(req.rawBody)
      if (!pairs) return { ok: false, reason: 'bad-body' }
      const url = signedUrl(base(), req.path, req.query)
      return twilio.validateRequest(opts.authToken, header, url, params(pairs)) ? OK : { ok: false, reason: 'bad-signature' }
    },
  }
}
