// The outbound side of a CPaaS adapter: sending the forwarded SMS (contract D5). Adapters throw
// ProviderError only, whose message is a code (`provider-http-500`, `provider-timeout`, ...):
// never a phone number, the text, a key or the provider's own error text.

import { MasklineError } from '../../engine/errors.js'

export interface SmsMessage {
  from: string
  to: string
  text: string
  /** Per-message delivery-status webhook (our POST /v1/webhooks/cpaas/sms). */
  webhookUrl?: string
}

export interface SendResult {
  providerMessageId: string
}

export interface SmsProvider {
  readonly name: string
  sendSms(msg: SmsMessage): Promise<SendResult>
}

export interface ProviderErrorOptions {
  /** The provider may have accepted (and sent) the message: resending risks a duplicate SMS. */
  ambiguous: boolean
  /** Trouble on the provider's side (counts towards its circuit breaker; another provider may
   * succeed). False for a refusal of this particular request, e.g. 400/422. */
  providerFault: boolean
  /** HTTP status when the provider answered. */
  status?: number
}

/** `code`: the provider-side code (`provider-circuit-open`, `provider-timeout`, …), as logged and counted. */
export class ProviderError extends MasklineError {
  readonly ambiguous: boolean
  readonly providerFault: boolean
  readonly status: number | undefined

  constructor(code: string, opts: ProviderErrorOptions) {
    super(code, code)
    this.ambiguous = opts.ambiguous
    this.providerFault = opts.providerFault
    this.status = opts.status
  }
}

/** Breaker or failover refused before any provider was asked: nothing was sent. */
export const circuitOpenError = (): ProviderError =>
  new ProviderError('provider-circuit-open', { ambiguous: false, providerFault: true })

export const timeoutError = (): ProviderError =>
  new ProviderError('provider-timeout', { ambiguous: true, providerFault: true })

/** Classifies an HTTP error status from a provider API.
 * - 5xx, 429, 401, 403 and 408 are the provider's trouble (or our credentials with it): they count
 *   towards the breaker and another provider may do better.
 * - Other 4xx refuse this request (bad number, invalid body): another provider would refuse it too.
 * - Only 504 is ambiguous: a gateway in front of the API gave up while the API may have accepted.
 *   Any other answered status means the API did not accept the message. */
export function httpProviderError(status: number): ProviderError {
  const fault = status >= 500 || status === 429 || status === 401 || status === 403 || status === 408
  return new ProviderError(`provider-http-${status}`, { ambiguous: status === 504, providerFault: fault, status })
}

/** Any thrown value → a ProviderError that is safe to log. Unknown errors are treated as
 * ambiguous provider faults (the safe side for duplicate SMS). */
export function toProviderError(err: unknown): ProviderError {
  if (err instanceof ProviderError) return err
  return new ProviderError('provider-error', { ambiguous: true, providerFault: true })
}
