// The JSON of each resource (docs/twilio-proxy.md), snake_case, dates as Twilio writes them, every `url`
// and `links` absolute on the façade's public base.
import type { ServiceRow, PhoneNumberRow } from '../../sql/twilio-proxy.js'
import type { SessionRow, ParticipantRow } from '../../sql/twilio-proxy-sessions.js'
import type { InteractionRecord } from '../../sql/twilio-proxy-interactions.js'
import { derivedSid, sidOf } from './sid.js'
import { twilioDate } from './params.js'

export const serviceSid = (id: string) => sidOf('KS', id)
export const sessionSid = (id: string) => sidOf('KC', id)
export const participantSid = (id: string) => sidOf('KP', id)
export const interactionSid = (id: string) => sidOf('KI', id)
export const numberSid = (number: string) => derivedSid('PN', number)

export function serviceJson(base: string, account: string, s: ServiceRow) {
  const url = `${base}/Services/${serviceSid(s.id)}`
  return {
    sid: serviceSid(s.id), account_sid: account, unique_name: s.unique_name, chat_instance_sid: s.chat_instance_sid,
    callback_url: s.callback_url, default_ttl: s.default_ttl, number_selection_behavior: s.number_selection_behavior,
    geo_match_level: s.geo_match_level, intercept_callback_url: s.intercept_callback_url,
    out_of_session_callback_url: s.out_of_session_callback_url,
    date_created: twilioDate(s.created_at), date_updated: twilioDate(s.updated_at), url,
    links: { sessions: `${url}/Sessions`, phone_numbers: `${url}/PhoneNumbers` },
  }
}

export function phoneNumberJson(base: string, account: string, p: PhoneNumberRow) {
  return {
    sid: numberSid(p.number), account_sid: account, service_sid: serviceSid(p.service_id),
    date_created: twilioDate(p.created_at), date_updated: twilioDate(p.updated_at),
    phone_number: p.number, friendly_name: p.number, iso_country: p.region.length === 2 ? p.region : null,
    // maskline's pool numbers carry voice and SMS (NUMBER_POOL); no fax, no MMS through the façade.
    capabilities: { fax: false, mms: false, sms: true, voice: true },
    url: `${base}/Services/${serviceSid(p.service_id)}/PhoneNumbers/${numberSid(p.number)}`,
    is_reserved: p.is_reserved, in_use: p.in_use,
  }
}

export function sessionJson(base: string, account: string, s: SessionRow) {
  const url = `${base}/Services/${serviceSid(s.service_id)}/Sessions/${sessionSid(s.id)}`
  return {
    sid: sessionSid(s.id), service_sid: serviceSid(s.service_id), account_sid: account,
    date_started: twilioDate(s.date_started), date_ended: twilioDate(s.date_ended),
    date_last_interaction: twilioDate(s.date_last_interaction), date_expiry: twilioDate(s.date_expiry),
    unique_name: s.unique_name, status: s.status, closed_reason: s.closed_reason, ttl: s.ttl, mode: s.mode,
    date_created: twilioDate(s.created_at), date_updated: twilioDate(s.updated_at), url,
    links: { interactions: `${url}/Interactions`, participants: `${url}/Participants` },
  }
}

export function participantJson(base: string, account: string, p: ParticipantRow, identifier: string) {
  const url = `${base}/Services/${serviceSid(p.service_id)}/Sessions/${sessionSid(p.session_id)}/Participants/${participantSid(p.id)}`
  return {
    sid: participantSid(p.id), session_sid: sessionSid(p.session_id), service_sid: serviceSid(p.service_id), account_sid: account,
    friendly_name: p.friendly_name, identifier, proxy_identifier: p.proxy_number, proxy_identifier_sid: numberSid(p.proxy_number),
    date_deleted: twilioDate(p.date_deleted), date_created: twilioDate(p.created_at), date_updated: twilioDate(p.updated_at), url,
    links: { message_interactions: `${url}/MessageInteractions` },
  }
}

const CALL_INBOUND: Record<string, string> = { RINGING: 'in-progress', ANSWERED: 'in-progress', COMPLETED: 'completed', MISSED: 'completed', FAILED: 'failed' }
const CALL_OUTBOUND: Record<string, string> = { RINGING: 'ringing', ANSWERED: 'in-progress', COMPLETED: 'completed', MISSED: 'no-answer', FAILED: 'failed' }
const SMS_OUTBOUND: Record<string, string> = { QUEUED: 'queued', SENT: 'sent', DELIVERED: 'delivered', FAILED: 'failed' }

/** The two legs of an interaction: resource SIDs minted from the provider's ids, Twilio's statuses. */
function legs(i: InteractionRecord) {
  const status = i.record_status ?? ''
  if (i.kind === 'call') {
    return {
      inbound: { sid: derivedSid('CA', i.provider_id ?? i.id), status: CALL_INBOUND[status] ?? 'unknown', type: 'Call' },
      outbound: { sid: derivedSid('CA', `${i.provider_id ?? i.id}/dial`), status: CALL_OUTBOUND[status] ?? 'unknown', type: 'Call' },
    }
  }
  if (i.kind === 'sms') {
    return {
      inbound: { sid: derivedSid('SM', i.provider_id ?? i.id), status: 'received', type: 'Message' },
      outbound: { sid: i.forward_id ? derivedSid('SM', i.forward_id) : null, status: SMS_OUTBOUND[status] ?? 'unknown', type: 'Message' },
    }
  }
  return { inbound: null, outbound: { sid: i.resource_sid, status: i.outbound_status ?? 'unknown', type: 'Message' } }
}

/** `via`: the participant whose MessageInteractions list this is (its URL and participant_sid). */
export function interactionJson(base: string, account: string, serviceId: string, i: InteractionRecord, via?: string) {
  const session = `${base}/Services/${serviceSid(serviceId)}/Sessions/${sessionSid(i.session_id)}`
  const { inbound, outbound } = legs(i)
  const out = {
    sid: interactionSid(i.id), session_sid: sessionSid(i.session_id), service_sid: serviceSid(serviceId), account_sid: account,
    data: i.kind === 'call' ? JSON.stringify({ duration: String(i.duration ?? 0) }) : '{}', type: i.kind === 'call' ? 'voice' : 'message',
    inbound_participant_sid: i.inbound_participant_id ? participantSid(i.inbound_participant_id) : null,
    inbound_resource_sid: inbound?.sid ?? null, inbound_resource_status: inbound?.status ?? null,
    inbound_resource_type: inbound?.type ?? null, inbound_resource_url: null,
    outbound_participant_sid: i.outbound_participant_id ? participantSid(i.outbound_participant_id) : null,
    outbound_resource_sid: outbound.sid, outbound_resource_status: outbound.sid || i.kind !== 'sms' ? outbound.status : null,
    outbound_resource_type: outbound.type, outbound_resource_url: null,
    date_created: twilioDate(i.created_at), date_updated: twilioDate(i.updated_at),
    url: via ? `${session}/Participants/${participantSid(via)}/MessageInteractions/${interactionSid(i.id)}` : `${session}/Interactions/${interactionSid(i.id)}`,
  }
  return via ? { ...out, participant_sid: participantSid(via) } : out
}
