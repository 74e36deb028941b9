// Telnyx SMS through the official SDK (telnyx 7.x). contract D5: `messages.send`, no SDK retries
// (a retry after a lost response could send the SMS twice).
//
// SDK quirks handled here:
// - The constructor reads TELNYX_API_KEY, TELNYX_BASE_URL, TELNYX_PUBLIC_KEY, TELNYX_CLIENT_ID,
//   TELNYX_CLIENT_SECRET and TELNYX_LOG from the environment for any option left undefined. Every
//   one is passed explicitly: with a client id/secret from the environment the SDK would fetch an
//   OAuth token from api.telnyx.com whatever baseURL says, and TELNYX_LOG=debug would log request
//   details. The SDK logger is switched off; its messages could carry provider error text.
// - `timeout` covers only the wait for response headers; the circuit breaker's 3 s timer covers
//   the body as well.
// - SDK errors (APIError carries the provider's error body in `message`) are mapped to
//   ProviderError codes and never rethrown as they are.
import Telnyx, { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } from 'telnyx'
import { httpProviderError, ProviderError, type SendResult, type SmsMessage, type SmsProvider } from '../provider.js'

const TELNYX_DEFAULT_BASE_URL = 'https://api.telnyx.com/v2'

export interface TelnyxProviderOptions {
  /** Name in health snapshots and logs, e.g. 'telnyx' and 'telnyx-backup'. */
  name?: string
  apiKey: string
  /** TELNYX_BASE_URL / TELNYX_BACKUP_BASE_URL; must end in /v2. */
  baseURL?: string
  messagingProfileId?: string
  /** Per-request timeout in ms (default 3000, the breaker's limit). */
  timeoutMs?: number
}

/** Connection failures that prove the request never reached the provider. */
const NOT_SENT_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT'])

function causeCode(err: unknown): string | undefined {
  let cur: unknown = err
  for (let i = 0; i < 5 && typeof cur === 'object' && cur !== null; i++) {
    const code = (cur as { code?: unknown }).code
    if (typeof code === 'string') return code
    cur = (cur as { cause?: unknown }).cause
  }
  return undefined
}

/** SDK error → ProviderError (code only; nothing from the provider's text). */
function mapTelnyxError(err: unknown): ProviderError {
  if (err instanceof ProviderError) return err
  if (err instanceof APIConnectionTimeoutError || err instanceof APIUserAbortError) {
    return new ProviderError('provider-timeout', { ambiguous: true, providerFault: true })
  }
  if (err instanceof APIConnectionError) {
    const code = causeCode(err.cause)
    if (code !== undefined && NOT_SENT_CODES.has(code)) {
      return new ProviderError('provider-unreachable', { ambiguous: false, providerFault: true })
    }
    return new ProviderError('provider-connection', { ambiguous: true, providerFault: true })
  }
  if (err instanceof APIError && typeof err.status === 'number') return httpProviderError(err.status)
  return new ProviderError('provider-error', { ambiguous: true, providerFault: true })
}

export class TelnyxProvider implements SmsProvider {
  readonly name: string
  readonly #client: Telnyx
  readonly #messagingProfileId: string | undefined

  constructor(opts: TelnyxProviderOptions) {
    if (!opts.apiKey) throw new Error('TelnyxProvider needs an API key (TELNYX_API_KEY)')
    const baseURL = (opts.baseURL ?? TELNYX_DEFAULT_BASE_URL).replace(/\/+$/, '')
    if (!/^https?:\/\/[^/]+(\/.*)?\/v2$/.test(baseURL)) throw new Error('TELNYX_BASE_URL must be an http(s) URL ending in /v2')
    this.name = opts.name ?? 'telnyx'
    this.#messagingProfileId = opts.messagingProfileId
    this.#client = new Telnyx({
      apiKey: opts.apiKey,
      baseURL,
      maxRetries: 0,
      timeout: opts.timeoutMs ?? 3000,
      publicKey: null,
      clientID: null,
      clientSecret: null,
      logLevel: 'off',
    })
  }

  async sendSms(msg: SmsMessage): Promise<SendResult> {
    let id: unknown
    try {
      const res = await this.#client.messages.send({
        from: msg.from,
        to: msg.to,
        text: msg.text,
        ...(this.#messagingProfileId ? { messaging_profile_id: this.#messagingProfileId } : {}),
        ...(msg.webhookUrl ? { webhook_url: msg.webhookUrl } : {}),
      })
      id = res.data?.id
    } catch (err) {
      throw mapTelnyxError(err)
    }
    // 2xx without a message id: Telnyx probably took the message, so this is ambiguous.
    if (typeof id !== 'string' || id === '') {
      throw new ProviderError('provider-bad-response', { ambiguous: true, providerFault: true })
    }
    return { providerMessageId: id }
  }
}
