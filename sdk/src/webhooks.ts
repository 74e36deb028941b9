// Verifies a webhook delivery of the service (Standard Webhooks: `webhook-id`,
// `webhook-timestamp`, `webhook-signature: v1,<base64 HMAC-SHA256>` keyed with the base64 part of
// the `whsec_` secret POST /v1/webhooks answered) with the `standardwebhooks` package, and gives
// back the event. Verify the raw body exactly as received, before any JSON parsing.
import { Webhook, WebhookVerificationError } from 'standardwebhooks'
import { MasklineError } from './errors.js'
import type { EventEnvelope } from './types.js'

export type WebhookHeaders = Headers | Record<string, string | string[] | undefined>

function plainHeaders(headers: WebhookHeaders): Record<string, string> {
  const out: Record<string, string> = {}
  const entries: Iterable<[string, string | string[] | undefined]> =
    typeof (headers as Headers).forEach === 'function' && typeof (headers as Headers).get === 'function'
      ? [...(headers as Headers).entries()]
      : Object.entries(headers as Record<string, string | string[] | undefined>)
  for (const [k, v] of entries) {
    const value = Array.isArray(v) ? v[0] : v
    if (value !== undefined) out[k.toLowerCase()] = value
  }
  return out
}

/**
 * The event of a signed delivery; a MasklineError of type `webhook-verification` when a header is
 * missing, the timestamp is more than 5 minutes off, or no signature matches.
 */
export function verifyWebhook(rawBody: string | Uint8Array, headers: WebhookHeaders, secret: string): EventEnvelope {
  const body = typeof rawBody === 'string' ? rawBody : new TextDecoder().decode(rawBody)
  try {
    return new Webhook(secret).verify(body, plainHeaders(headers)) as EventEnvelope
  } catch (err) {
    if (!(err instanceof WebhookVerificationError)) throw err
    throw new MasklineError({ type: 'webhook-verification', status: 400, title: 'Webhook verification failed', detail: err.message }, { cause: err })
  }
}
