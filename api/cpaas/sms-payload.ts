// Normalizes POST /v1/webhooks/cpaas/sms (contract D5): Telnyx JSON webhooks
// (`message.received`, `message.sent`, `message.finalized`) or a Twilio-style form. The text is
// handed to the forwarder only; it is never stored or logged (contract 1.6), and nothing here puts it
// into an error.
import type { SmsStatus } from '../../engine/types.js'
import { parseForm } from './form.js'
import { hasUncleanText, hasUnicodeEscape, isUtf8 } from '../text-guard.js'

export type SmsCallback =
  | { kind: 'inbound'; messageId: string; from: string; to: string; text: string }
  | { kind: 'status'; messageId: string; status: SmsStatus }
  | { kind: 'ignored' }
  | { kind: 'invalid' }

const INVALID: SmsCallback = { kind: 'invalid' }
const IGNORED: SmsCallback = { kind: 'ignored' }

function str(v: unknown): string | null {
  return typeof v === 'string' && v !== '' ? v : null
}

function obj(v: unknown): Record<string, unknown> | null {
  return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : null
}

/** Telnyx per-recipient status → ours. `delivery_unconfirmed` means the carrier took it but sent no
 * receipt: SENT is the most we know. */
export function mapTelnyxStatus(s: string | null): SmsStatus | null {
  switch (s) {
    case 'queued': case 'sending': return 'QUEUED'
    case 'sent': case 'delivery_unconfirmed': return 'SENT'
    case 'delivered': return 'DELIVERED'
    case 'sending_failed': case 'delivery_failed': case 'failed': return 'FAILED'
    default: return null
  }
}

/** Twilio MessageStatus → ours (`received` is an inbound message, handled before this). */
function mapFormStatus(s: string): SmsStatus | null {
  switch (s) {
    case 'accepted': case 'scheduled': case 'queued': case 'sending': return 'QUEUED'
    case 'sent': return 'SENT'
    case 'delivered': case 'read': return 'DELIVERED'
    case 'undelivered': case 'failed': case 'canceled': return 'FAILED'
    default: return null
  }
}

/** A parsed Telnyx webhook body (`{data: {event_type, payload}}`). */
export function normalizeTelnyxSms(body: unknown): SmsCallback {
  const data = obj(obj(body)?.data)
  if (!data) return INVALID
  const eventType = str(data.event_type)
  if (!eventType) return INVALID
  if (eventType !== 'message.received' && eventType !== 'message.sent' && eventType !== 'message.finalized') {
    return IGNORED
  }
  const payload = obj(data.payload)
  if (!payload) return INVALID
  // payload.id is the message id (stable across a message's events); data.id is the event id.
  const messageId = str(payload.id)
  if (!messageId) return INVALID
  const to0 = Array.isArray(payload.to) ? obj(payload.to[0]) : null
  if (eventType === 'message.received') {
    const from = str(obj(payload.from)?.phone_number)
    const to = str(to0?.phone_number)
    if (!from || !to) return INVALID
    // MMS without text: forwarded as '' and left to the caller (SMS text must be non-empty to send).
    const text = typeof payload.text === 'string' ? payload.text : ''
    return { kind: 'inbound', messageId, from, to, text }
  }
  const status = mapTelnyxStatus(str(to0?.status)) ?? (eventType === 'message.sent' ? 'SENT' : null)
  return status ? { kind: 'status', messageId, status } : IGNORED
}

/** A parsed form callback: inbound (`MessageSid`, `From`, `To`, `Body`) or a status callback
 * (`MessageStatus`/`SmsStatus` other than `received`). */
export function normalizeFormSms(form: Readonly<Record<string, string>>): SmsCallback {
  const messageId = str(form.MessageSid) ?? str(form.SmsSid)
  if (!messageId) return INVALID
  const statusRaw = str(form.MessageStatus) ?? str(form.SmsStatus)
  if (statusRaw !== null && statusRaw !== 'received') {
    const status = mapFormStatus(statusRaw)
    return status ? { kind: 'status', messageId, status } : IGNORED
  }
  const from = str(form.From)
  const to = str(form.To)
  if (!from || !to) return INVALID
  return { kind: 'inbound', messageId, from, to, text: form.Body ?? '' }
}

/** Dispatch on Content-Type: JSON → Telnyx, otherwise form. Never throws. */
export function parseSmsCallback(contentType: string | undefined, rawBody: Buffer | string): SmsCallback {
  const ct = (contentType ?? '').toLowerCase()
  if (ct.includes('json')) {
    // contract D13: not UTF-8, or a NUL / lone surrogate in any string, is refused like bad JSON.
    if (typeof rawBody !== 'string' && !isUtf8(rawBody)) return INVALID
    let parsed: unknown
    try {
      parsed = JSON.parse(typeof rawBody === 'string' ? rawBody : rawBody.toString('utf8'))
    } catch {
      return INVALID
    }
    // Only a `\u` escape can put a NUL or a lone surrogate into valid UTF-8 JSON: walk only then.
    if ((typeof rawBody === 'string' || hasUnicodeEscape(rawBody)) && hasUncleanText(parsed)) return INVALID
    return normalizeTelnyxSms(parsed)
  }
  const form = parseForm(rawBody)
  return form ? normalizeFormSms(form) : INVALID
}
