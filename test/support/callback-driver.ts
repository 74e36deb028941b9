// Plays the telephony provider against our callbacks (contract D5): builds the form / JSON bodies
// Telnyx posts, signs them (Ed25519 like Telnyx, or HMAC-SHA1 like Twilio) and POSTs them with
// global fetch to the base URL given to the constructor.
//
//   const driver = new CallbackDriver({ baseUrl: api.url })
//   env.TELNYX_PUBLIC_KEY = driver.publicKeyBase64
//   const res = await driver.voice({ from: A, to: PROXY, callSid: 'v3:abc' })
import { createHash, generateKeyPairSync, randomUUID, sign, type KeyObject } from 'node:crypto'
import { createRequire } from 'node:module'
import { encodeForm, formFromPairs, formPairs } from '../../api/cpaas/form.js'
import { hmacSha1Signature, signedUrl } from '../../api/cpaas/signature.js'
import { EMPTY_RESPONSE } from '../../api/cpaas/telnyx/texml.js'

export const CALLBACK_BASE_PATH = '/v1/webhooks/cpaas'
export const TWILIO_BASE_PATH = '/v1/webhooks/twilio'

/** The providers whose dialect the callback suites run in. */
export const DIALECTS = ['telnyx', 'twilio'] as const
export type DialectName = typeof DIALECTS[number]

export interface TelnyxKeyPair {
  /** Base64 of the raw 32-byte public key: the TELNYX_PUBLIC_KEY value. */
  publicKeyBase64: string
  privateKey: KeyObject
}

export function generateTelnyxKeyPair(): TelnyxKeyPair {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519')
  const jwk = publicKey.export({ format: 'jwk' })
  return { publicKeyBase64: Buffer.from(jwk.x!, 'base64url').toString('base64'), privateKey }
}

/** Telnyx-style headers for a raw body. */
export function signTelnyx(privateKey: KeyObject, rawBody: string | Buffer, timestampSeconds: number): Record<string, string> {
  const ts = String(Math.floor(timestampSeconds))
  const signature = sign(null, Buffer.concat([Buffer.from(ts + '|'), Buffer.from(rawBody)]), privateKey).toString('base64')
  return { 'telnyx-timestamp': ts, 'telnyx-signature-ed25519': signature }
}

/** 'twilio': Twilio itself, on /v1/webhooks/twilio: HMAC-SHA1 with the Auth Token (each signature
 * checked with the SDK's twilio.validateRequest before it is sent), form bodies for SMS too. */
export type SigningMode = 'telnyx-ed25519' | 'hmac-sha1' | 'none' | 'twilio'

/** The twilio SDK's own check, loaded on first use: the suites that never play Twilio do not pay for the SDK. */
let validate: typeof import('twilio').validateRequest | undefined
const validateRequest = () => validate ??= (createRequire(import.meta.url)('twilio') as typeof import('twilio')).validateRequest

/** Telnyx message statuses (the suites' vocabulary) → Twilio's MessageStatus. */
const TWILIO_STATUS: Record<string, string> = {
  queued: 'queued', sending: 'sending', sent: 'sent', delivered: 'delivered', delivery_unconfirmed: 'sent',
  sending_failed: 'failed', delivery_failed: 'undelivered', failed: 'failed',
}

export interface CallbackDriverOptions {
  /** Where the service listens, e.g. `http://127.0.0.1:40123`. */
  baseUrl: string
  mode?: SigningMode
  /** Defaults to a fresh pair. */
  keyPair?: TelnyxKeyPair
  /** Required for hmac-sha1 and twilio (the Auth Token). */
  hmacSecret?: string
  /** The PUBLIC_BASE_URL the service signs against (default: baseUrl). */
  publicBaseUrl?: string
  /** Epoch ms, for the telnyx-timestamp (default Date.now). */
  now?: () => number
  /** Awaited after each callback is answered: e.g. the in-process service's record flush. */
  settled?: () => Promise<void>
}

export interface PostOptions {
  /** Override the signing timestamp (Unix seconds), e.g. to send a stale one. */
  timestampSeconds?: number
  /** Replace or drop (`null`) individual headers after signing. */
  headers?: Record<string, string | null>
  /** Change the body after it was signed (a tampering test). */
  tamper?: (raw: string) => string
}

export interface VoiceParams { from: string; to: string; callSid?: string; callStatus?: string; direction?: string; extra?: Record<string, string> }
export interface StatusParams { callId: string; callSid: string; callStatus: string; callDuration?: number; parentCallSid?: string }
export interface ParentStatusParams { callSid: string; callStatus: string; callDuration?: number }
export interface DialStatusParams { callId: string; callSid: string; dialCallStatus: string; dialCallSid?: string; dialCallDuration?: number; recordingUrl?: string }
export interface RecordingParams { callId: string; callSid: string; recordingSid: string; recordingStatus?: string; recordingUrl: string; recordingDuration: number }
export interface SmsReceivedParams { from: string; to: string; text: string; messageId?: string }
export interface SmsStatusParams { messageId: string; eventType: 'message.sent' | 'message.finalized'; status: string; from?: string; to?: string }

/** Telnyx `message.received` webhook body. */
export function telnyxSmsReceivedBody(p: SmsReceivedParams): string {
  return JSON.stringify({
    data: {
      record_type: 'event',
      id: randomUUID(),
      event_type: 'message.received',
      occurred_at: new Date().toISOString(),
      payload: {
        record_type: 'message',
        direction: 'inbound',
        id: p.messageId ?? randomUUID(),
        type: 'SMS',
        from: { phone_number: p.from, carrier: 'FAKE', line_type: 'Wireless' },
        to: [{ phone_number: p.to, status: 'webhook_delivered', carrier: 'TELNYX LLC', line_type: 'VoIP' }],
        cc: [],
        text: p.text,
        media: [],
        encoding: 'GSM-7',
        parts: 1,
        received_at: new Date().toISOString(),
      },
    },
    meta: { attempt: 1, delivered_to: 'fake' },
  })
}

/** Telnyx `message.sent` / `message.finalized` webhook body. */
export function telnyxSmsStatusBody(p: SmsStatusParams): string {
  return JSON.stringify({
    data: {
      record_type: 'event',
      id: randomUUID(),
      event_type: p.eventType,
      occurred_at: new Date().toISOString(),
      payload: {
        record_type: 'message',
        direction: 'outbound',
        id: p.messageId,
        type: 'SMS',
        from: { phone_number: p.from ?? '+12025550100' },
        to: [{ phone_number: p.to ?? '+12025550199', status: p.status }],
        text: '',
      },
    },
    meta: { attempt: 1, delivered_to: 'fake' },
  })
}

export class CallbackDriver {
  readonly baseUrl: string
  readonly mode: SigningMode
  /** Where the callbacks go: /v1/webhooks/twilio for Twilio, /v1/webhooks/cpaas otherwise. */
  readonly basePath: string
  /** The body of an acknowledged inbound SMS: `{"ok":true}`, or Twilio's empty TwiML. */
  readonly smsAck: string
  readonly keyPair: TelnyxKeyPair
  readonly #hmacSecret: string | undefined
  readonly #publicBaseUrl: string
  readonly #now: () => number
  readonly #settled: (() => Promise<void>) | undefined

  constructor(opts: CallbackDriverOptions) {
    this.baseUrl = opts.baseUrl.replace(/\/+$/, '')
    this.mode = opts.mode ?? 'telnyx-ed25519'
    this.basePath = this.mode === 'twilio' ? TWILIO_BASE_PATH : CALLBACK_BASE_PATH
    this.smsAck = this.mode === 'twilio' ? EMPTY_RESPONSE : '{"ok":true}'
    this.keyPair = opts.keyPair ?? generateTelnyxKeyPair()
    this.#hmacSecret = opts.hmacSecret
    this.#publicBaseUrl = (opts.publicBaseUrl ?? this.baseUrl).replace(/\/+$/, '')
    this.#now = opts.now ?? Date.now
    this.#settled = opts.settled
    if ((this.mode === 'hmac-sha1' || this.mode === 'twilio') && !this.#hmacSecret) throw new Error(`CallbackDriver: ${this.mode} needs hmacSecret`)
  }

  get publicKeyBase64(): string {
    return this.keyPair.publicKeyBase64
  }

  /**
   * What the provider would add to this request: signature headers (content-type excluded) and the
   * final query (hmac-sha1 with a JSON body appends Twilio's `bodySHA256`).
   */
  sign(path: string, query: string, rawBody: string, contentType: string, timestampSeconds?: number): { headers: Record<string, string>; query: string } {
    if (this.mode === 'telnyx-ed25519') {
      return { headers: signTelnyx(this.keyPair.privateKey, rawBody, timestampSeconds ?? Math.floor(this.#now() / 1000)), query }
    }
    if (this.mode === 'twilio') {
      const url = signedUrl(this.#publicBaseUrl, path, query)
      const pairs = formPairs(rawBody) ?? []
      const signature = hmacSha1Signature(this.#hmacSecret!, url, pairs)
      // The driver signs as Twilio does, or the suites prove nothing: the SDK's own check must agree.
      if (!validateRequest()(this.#hmacSecret!, signature, url, formFromPairs(pairs))) throw new Error('CallbackDriver: twilio.validateRequest refuses the signature')
      return { headers: { 'x-twilio-signature': signature }, query }
    }
    if (this.mode === 'hmac-sha1') {
      const json = contentType.includes('json')
      let q = query
      if (json) {
        const hash = createHash('sha256').update(rawBody).digest('hex')
        q = q ? `${q}&bodySHA256=${hash}` : `bodySHA256=${hash}`
      }
      const pairs = json ? [] : (formPairs(rawBody) ?? [])
      return { headers: { 'x-twilio-signature': hmacSha1Signature(this.#hmacSecret!, signedUrl(this.#publicBaseUrl, path, q), pairs) }, query: q }
    }
    return { headers: {}, query }
  }

  /** Signs and POSTs a raw body to `CALLBACK_BASE_PATH + subPath` (`subPath` may carry a query). */
  async post(subPath: string, rawBody: string, contentType: string, opts: PostOptions = {}): Promise<Response> {
    const full = this.basePath + subPath
    const qi = full.indexOf('?')
    const path = qi === -1 ? full : full.slice(0, qi)
    const signed = this.sign(path, qi === -1 ? '' : full.slice(qi + 1), rawBody, contentType, opts.timestampSeconds)
    const headers: Record<string, string> = { 'content-type': contentType, ...signed.headers }
    for (const [k, v] of Object.entries(opts.headers ?? {})) {
      if (v === null) delete headers[k]
      else headers[k] = v
    }
    const body = opts.tamper ? opts.tamper(rawBody) : rawBody
    const res = await fetch(this.baseUrl + path + (signed.query ? '?' + signed.query : ''), { method: 'POST', headers, body })
    // Records are written behind the answer (contract D5): an in-process service lets the test
    // see what this callback caused before it reads anything.
    await this.#settled?.()
    return res
  }

  postForm(subPath: string, fields: Record<string, string | number | undefined>, opts?: PostOptions): Promise<Response> {
    return this.post(subPath, encodeForm(fields), 'application/x-www-form-urlencoded', opts)
  }

  postJson(subPath: string, rawJson: string, opts?: PostOptions): Promise<Response> {
    return this.post(subPath, rawJson, 'application/json', opts)
  }

  /** POST /voice: the inbound call fetch. Answer: TeXML. */
  voice(p: VoiceParams, opts?: PostOptions): Promise<Response> {
    return this.postForm('/voice', {
      AccountSid: 'fake-account',
      CallSid: p.callSid ?? `v3:${randomUUID()}`,
      From: p.from,
      To: p.to,
      CallStatus: p.callStatus ?? 'ringing',
      Direction: p.direction ?? 'inbound',
      ...p.extra,
    }, opts)
  }

  /** POST /voice/status?callId=: the Number statusCallback. */
  status(p: StatusParams, opts?: PostOptions): Promise<Response> {
    return this.postForm(`/voice/status?callId=${encodeURIComponent(p.callId)}`, {
      CallSid: p.callSid,
      ParentCallSid: p.parentCallSid,
      CallStatus: p.callStatus,
      CallDuration: p.callDuration,
    }, opts)
  }

  /** POST /voice/status without a callId: the TeXML application's status callback for the parent
   * (inbound) call, whose CallSid is the one of the voice fetch. */
  parentStatus(p: ParentStatusParams, opts?: PostOptions): Promise<Response> {
    return this.postForm('/voice/status', { CallSid: p.callSid, CallStatus: p.callStatus, CallDuration: p.callDuration }, opts)
  }

  /** POST /voice/dial-status?callId=: the Dial action. */
  dialStatus(p: DialStatusParams, opts?: PostOptions): Promise<Response> {
    return this.postForm(`/voice/dial-status?callId=${encodeURIComponent(p.callId)}`, {
      CallSid: p.callSid,
      DialCallStatus: p.dialCallStatus,
      DialCallSid: p.dialCallSid,
      DialCallDuration: p.dialCallDuration,
      RecordingUrl: p.recordingUrl,
    }, opts)
  }

  /** POST /voice/recording?callId=: the recordingStatusCallback. */
  recording(p: RecordingParams, opts?: PostOptions): Promise<Response> {
    return this.postForm(`/voice/recording?callId=${encodeURIComponent(p.callId)}`, {
      CallSid: p.callSid,
      RecordingSid: p.recordingSid,
      RecordingStatus: p.recordingStatus ?? 'completed',
      RecordingUrl: p.recordingUrl,
      RecordingDuration: p.recordingDuration,
    }, opts)
  }

  /** POST /sms: an inbound message (Telnyx `message.received` JSON, or Twilio's form). */
  smsReceived(p: SmsReceivedParams, opts?: PostOptions): Promise<Response> {
    if (this.mode === 'twilio') {
      const sid = p.messageId ?? `SM${randomUUID().replaceAll('-', '')}`
      return this.postForm('/sms', {
        ToCountry: 'US', SmsMessageSid: sid, NumMedia: '0', SmsSid: sid, SmsStatus: 'received', Body: p.text, To: p.to,
        NumSegments: '1', MessageSid: sid, AccountSid: 'AC' + '0'.repeat(32), From: p.from, ApiVersion: '2010-04-01',
      }, opts)
    }
    return this.postJson('/sms', telnyxSmsReceivedBody(p), opts)
  }

  /** POST /sms: a delivery status (Telnyx `message.sent` / `message.finalized` JSON, or Twilio's
   * status callback form with the status translated). */
  smsStatus(p: SmsStatusParams, opts?: PostOptions): Promise<Response> {
    if (this.mode === 'twilio') {
      const status = TWILIO_STATUS[p.status] ?? p.status
      return this.postForm('/sms', {
        SmsSid: p.messageId, SmsStatus: status, MessageStatus: status, To: p.to ?? '+12025550199', MessageSid: p.messageId,
        AccountSid: 'AC' + '0'.repeat(32), From: p.from ?? '+12025550100', ApiVersion: '2010-04-01',
      }, opts)
    }
    return this.postJson('/sms', telnyxSmsStatusBody(p), opts)
  }

  /** POST /sms as a form (`MessageSid`, `From`, `To`, `Body`). */
  smsForm(p: SmsReceivedParams, opts?: PostOptions): Promise<Response> {
    return this.postForm('/sms', { MessageSid: p.messageId ?? `SM${randomUUID().replaceAll('-', '')}`, From: p.from, To: p.to, Body: p.text }, opts)
  }
}
