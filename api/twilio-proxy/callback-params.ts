// The form a Service's callbacks carry (docs/twilio-proxy.md, Callbacks), signed as Twilio signs
// its webhooks: X-Twilio-Signature under the account's auth token, computed by the `twilio` SDK
// itself, so `twilio.validateRequest` accepts it. Participant SIDs only: never a phone number or
// a message body (the out-of-session callback's caller aside, as Proxy defines it).
import twilio from 'twilio'
import type { InteractionRecord } from '../../sql/twilio-proxy-interactions.js'
import { encodeForm } from '../cpaas/form.js'
import { interactionJson } from './serialize.js'

export type CallbackParams = Record<string, string>

const INBOUND = ['ParticipantSid', 'ResourceSid', 'ResourceStatus', 'ResourceType', 'ResourceUrl'] as const

/** The callback_url parameters of an interaction: its REST fields, camelCase, `interaction`-prefixed. */
export function interactionParams(accountSid: string, serviceId: string, i: InteractionRecord): CallbackParams {
  const j = interactionJson('', accountSid, serviceId, i)
  const p: CallbackParams = {
    interactionSid: j.sid, interactionSessionSid: j.session_sid, interactionServiceSid: j.service_sid, interactionAccountSid: j.account_sid,
    interactionType: j.type === 'voice' ? 'Voice' : 'Message', interactionData: j.data,
    interactionDateCreated: j.date_created ?? '', interactionDateUpdated: j.date_updated ?? '',
  }
  const leg = j as unknown as Record<string, string | null>
  for (const side of ['inbound', 'outbound'] as const) {
    for (const k of INBOUND) {
      const snake = `${side}_${k.replace(/[A-Z]/g, c => `_${c.toLowerCase()}`).slice(1)}`
      p[`${side}${k}`] = leg[snake] ?? ''
    }
  }
  return p
}

/** The intercept_callback_url parameters: the same without the outbound leg (not placed yet). */
export function interceptParams(p: CallbackParams): CallbackParams {
  return Object.fromEntries(Object.entries(p).filter(([k]) => !k.startsWith('outbound')))
}

/** The body and headers of a signed form POST to `url`. */
export function signedForm(authToken: string, url: string, params: CallbackParams): { body: string; headers: Record<string, string>; contentType: string } {
  return {
    body: encodeForm(params),
    headers: { 'x-twilio-signature': twilio.getExpectedTwilioSignature(authToken, url, params) },
    contentType: 'application/x-www-form-urlencoded',
  }
}
