// Twilio SMS through the official SDK (twilio 6.x): the Messages API, no SDK retries (a retry after
// a lost response could send the SMS twice), a timeout, and a statusCallback so delivery statuses
// come back to POST /v1/webhooks/twilio/sms.
//
// SDK quirks handled here:
// - The client reads TWILIO_ACCOUNT_SID, TWILIO_AUTH_TOKEN, TWILIO_LOG_LEVEL, TWILIO_EDGE and
//   TWILIO_REGION from the environment for options left undefined. Credentials are always passed;
//   logLevel is set explicitly ('debug' would print requests to stdout).
// - Retries: the SDK retries only 429s, and only with `autoRetry: true` (its `maxRetries: 0` is
//   read as the default 3). `autoRetry` stays false and the httpClient is ours, so nothing retries.
// - Its base URL (https://api.twilio.com) is not an option: TWILIO_BASE_URL is honoured by an
//   httpClient (a twilio.RequestClient) that rewrites each request's origin, the SDK's documented
//   extension point for custom HTTP handling.
// - Errors: RestException carries the provider's message; axios errors carry the request (with its
//   Authorization header). Both are mapped to ProviderError codes and never rethrown as they are.
import twilio from 'twilio'
import type RequestClient from 'twilio/lib/base/RequestClient.js'
import { httpProviderError, ProviderError, type SendResult, type SmsMessage, type SmsProvider } from '../provider.js'

export interface TwilioProviderOptions {
  /** Name in health snapshots and logs (default 'twilio'). */
  name?: string
  accountSid: string
  /** TWILIO_AUTH_TOKEN; or an API key pair (apiKey + apiSecret) for the REST calls. */
  authToken?: string
  apiKey?: string
  apiSecret?: string
  /** TWILIO_BASE_URL: an http(s) origin (and optional path prefix) standing in for https://api.twilio.com. */
  baseUrl?: string
  /** The delivery-status webhook for each message (read per send: the listener's URL may come late). */
  statusCallbackUrl?: () => string
  /** Per-request timeout in ms (default 3000, the breaker's limit). */
  timeoutMs?: number
}

/** Connection failures that prove the request never reached the provider. */
const NOT_SENT_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH'])
const TIMEOUT_CODES = new Set(['ECONNABORTED', 'ETIMEDOUT', 'ESOCKETTIMEDOUT'])

/** SDK error → ProviderError (code only; nothing from the provider's text or the request). */
function mapTwilioError(err: unknown): ProviderError {
  if (err instanceof ProviderError) return err
  if (err instanceof twilio.RestException && typeof err.status === 'number') return httpProviderError(err.status)
  const code = typeof err === 'object' && err !== null ? (err as { code?: unknown }).code : undefined
  if (typeof code === 'string' && NOT_SENT_CODES.has(code)) return new ProviderError('provider-unreachable', { ambiguous: false, providerFault: true })
  if (typeof code === 'string' && TIMEOUT_CODES.has(code)) return new ProviderError('provider-timeout', { ambiguous: true, providerFault: true })
  if (typeof code === 'string') return new ProviderError('provider-connection', { ambiguous: true, providerFault: true })
  return new ProviderError('provider-error', { ambiguous: true, providerFault: true })
}

type RequestOptions<T> = RequestClient.RequestOptions<T>
type RequestResponse<T> = Awaited<ReturnType<RequestClient['request']>> & { body: T }

/** A RequestClient sending every request to `baseUrl` instead of Twilio's host. */
class RetargetedClient extends twilio.RequestClient {
  readonly #base: string
  constructor(base: string, opts: ConstructorParameters<typeof twilio.RequestClient>[0]) {
    super(opts)
    this.#base = base
  }

  override request<TData>(opts: RequestOptions<TData>): Promise<RequestResponse<TData>> {
    const u = new URL(opts.uri)
    return super.request<TData>({ ...opts, uri: this.#base + u.pathname + u.search })
  }
}

export class TwilioProvider implements SmsProvider {
  readonly name: string
  readonly #client: twilio.Twilio
  readonly #statusCallbackUrl: (() => string) | undefined

  constructor(opts: TwilioProviderOptions) {
    if (!/^AC[0-9a-fA-F]{32}$/.test(opts.accountSid)) throw new Error('TwilioProvider needs TWILIO_ACCOUNT_SID (AC followed by 32 hex digits)')
    const [user, password] = opts.apiKey ? [opts.apiKey, opts.apiSecret] : [opts.accountSid, opts.authToken]
    if (!password) throw new Error('TwilioProvider needs TWILIO_AUTH_TOKEN, or TWILIO_API_KEY with TWILIO_API_SECRET')
    const base = opts.baseUrl?.replace(/\/+$/, '')
    if (base !== undefined && !/^https?:\/\/[^/\s]+(\/\S*)?$/.test(base)) throw new Error('TWILIO_BASE_URL must be an http(s) URL')
    this.name = opts.name ?? 'twilio'
    this.#statusCallbackUrl = opts.statusCallbackUrl
    const timeout = opts.timeoutMs ?? 3000
    const clientOpts = { timeout, autoRetry: false, keepAlive: true }
    this.#client = twilio(user, password, {
      accountSid: opts.accountSid,
      autoRetry: false,
      timeout,
      logLevel: 'info',
      httpClient: base ? new RetargetedClient(base, clientOpts) : new twilio.RequestClient(clientOpts),
    })
  }

  async sendSms(msg: SmsMessage): Promise<SendResult> {
    let sid: unknown
    try {
      const statusCallback = this.#statusCallbackUrl?.()
      const res = await this.#client.messages.create({ from: msg.from, to: msg.to, body: msg.text, ...(statusCallback ? { statusCallback } : {}) })
      sid = res.sid
    } catch (err) {
      throw mapTwilioError(err)
    }
    // 2xx without a message sid: Twilio probably took the message, so this is ambiguous.
    if (typeof sid !== 'string' || sid === '') throw new ProviderError('provider-bad-response', { ambiguous: true, providerFault: true })
    return { providerMessageId: sid }
  }
}
