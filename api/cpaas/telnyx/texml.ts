// TeXML answers for the voice callbacks (contract 4.10, contract D5). Plain string concatenation, no
// XML library: this sits on the sub-millisecond path of an inbound call. Every interpolated value
// goes through escapeXml, attributes and text alike.
import type { Dialect } from '../dialect.js'

/** Structural copy of the engine's routing decision (engine/route-decision.ts, re-exported by
 * engine/index.ts) with plain strings instead of branded ids, so tests and tools can build one from
 * literals. The engine's richer types (branded ids, extra fields) are assignable to these. */
export type RouteDecision =
  | {
      kind: 'connect'
      sessionId: string
      tenantId: string
      direction: 'A_TO_B' | 'B_TO_A'
      to: string
      callerId: string
      recording: boolean
      consent: 'DEFAULT' | 'CUSTOM' | 'NONE'
      consentAudioUrl: string | null
    }
  | { kind: 'direction-not-allowed' }
  | { kind: 'channel-not-allowed' }
  | { kind: 'no-session'; proxy: string; tenant: ExpiredTenant | null }
  | { kind: 'unknown-proxy' }

export interface ExpiredTenant {
  expiredCallBehavior: 'DEAD_LINE' | 'REDIRECT_SUPPORT' | 'PLAY_MESSAGE'
  supportPhone: string | null
}

export interface ConnectTexmlInput {
  /** PUBLIC_BASE_URL; a trailing slash is tolerated. */
  baseUrl: string
  /** Our call record id, echoed back by the provider in the callback query (`?callId=`). */
  callId: string
  /** The other party's real number (E.164). */
  to: string
  /** The proxy number, shown to the callee. */
  callerId: string
  recording: boolean
  consent: 'DEFAULT' | 'CUSTOM' | 'NONE'
  consentAudioUrl: string | null
  /** Per-call maximum; default 3600 (contract 8.7: 60-minute per-call maximum). */
  timeLimitSeconds?: number
  /** Where the provider posts this call's callbacks (default `/v1/webhooks/cpaas`); another
   * provider's dialect (twilio/twiml.ts) names its own. */
  callbackPrefix?: string
}

export const EMPTY_RESPONSE = '<?xml version="1.0" encoding="UTF-8"?><Response/>'
export const TEXML_CONTENT_TYPE = 'application/xml'
const DEFAULT_TIME_LIMIT_SECONDS = 3600
const CALLBACK_PREFIX = '/v1/webhooks/cpaas'

export const CONSENT_MESSAGE = 'This call may be recorded for quality and training purposes.'
export const OUT_OF_SERVICE_MESSAGE = 'The number you have dialed is not in service. Goodbye.'
export const ENDED_MESSAGE =
  'This conversation has ended and this number is no longer available. Please contact us through our usual channels. Goodbye.'

const OPEN = '<?xml version="1.0" encoding="UTF-8"?><Response>'
const CLOSE = '</Response>'
const HANGUP = OPEN + '<Hangup/>' + CLOSE

// Characters that need an entity, plus what XML 1.0 cannot carry at all: C0 controls other than
// TAB/LF/CR, U+FFFE/U+FFFF and lone surrogates. The latter are dropped (controls) or replaced with
// U+FFFD (lone surrogates) so a hostile value can never make the document malformed.
const NEEDS_ESCAPE =
  // eslint-disable-next-line no-control-regex -- matching the controls XML 1.0 forbids is the point
  /[&<>"'\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/
const ESCAPE_ALL = new RegExp(NEEDS_ESCAPE.source, 'g')

function entity(ch: string): string {
  switch (ch) {
    case '&': return '&amp;'
    case '<': return '&lt;'
    case '>': return '&gt;'
    case '"': return '&quot;'
    case "'": return '&apos;'
    default: return ch.length === 1 && ch.charCodeAt(0) >= 0xd800 && ch.charCodeAt(0) <= 0xdfff ? '\uFFFD' : ''
  }
}

/** Escapes for both attribute values (double or single quoted) and text content. The common case
 * (nothing to escape) returns the input without allocating. */
export function escapeXml(value: string): string {
  return NEEDS_ESCAPE.test(value) ? value.replace(ESCAPE_ALL, entity) : value
}

function trimSlash(baseUrl: string): string {
  return baseUrl.endsWith('/') ? baseUrl.slice(0, -1) : baseUrl
}

/** `{base}{prefix}/<path>?callId=<id>`, URL-encoded (not yet XML-escaped). */
function callbackUrl(baseUrl: string, prefix: string, path: string, callId: string): string {
  return trimSlash(baseUrl) + prefix + path + '?callId=' + encodeURIComponent(callId)
}

/** Routable session (contract D5): consent first when recording, then the Dial to the other party. */
export function connectTexml(input: ConnectTexmlInput): string {
  const { baseUrl, callId, recording } = input
  const prefix = input.callbackPrefix ?? CALLBACK_PREFIX
  const limit = input.timeLimitSeconds ?? DEFAULT_TIME_LIMIT_SECONDS
  let xml = OPEN
  if (recording) {
    // R-REC: never record without a consent announcement. CUSTOM without an audio URL and the
    // (invalid) NONE fall back to the spoken default rather than recording silently.
    if (input.consent === 'CUSTOM' && input.consentAudioUrl) {
      xml += '<Play>' + escapeXml(input.consentAudioUrl) + '</Play>'
    } else {
      xml += '<Say>' + CONSENT_MESSAGE + '</Say>'
    }
  }
  xml += '<Dial callerId="' + escapeXml(input.callerId) +
    '" timeLimit="' + (Number.isSafeInteger(limit) && limit > 0 ? limit : DEFAULT_TIME_LIMIT_SECONDS) +
    '" action="' + escapeXml(callbackUrl(baseUrl, prefix, '/voice/dial-status', callId)) + '"'
  if (recording) {
    xml += ' record="record-from-answer-dual" recordingStatusCallback="' +
      escapeXml(callbackUrl(baseUrl, prefix, '/voice/recording', callId)) + '"'
  }
  xml += '><Number statusCallback="' + escapeXml(callbackUrl(baseUrl, prefix, '/voice/status', callId)) +
    '" statusCallbackEvent="initiated ringing answered completed">' + escapeXml(input.to) +
    '</Number></Dial>' + CLOSE
  return xml
}

/** `reason` 'rejected' for a direction the session does not allow; omitted for an unknown proxy. */
export function rejectTexml(reason?: 'rejected' | 'busy'): string {
  return reason === undefined ? OPEN + '<Reject/>' + CLOSE : OPEN + '<Reject reason="' + reason + '"/>' + CLOSE
}

export function hangupTexml(): string {
  return HANGUP
}

/** Expired session or unknown caller on a known proxy: the tenant's expiredCallBehavior (contract 3.1).
 * No tenant (or REDIRECT_SUPPORT without a support number) behaves as DEAD_LINE. */
export function expiredTexml(tenant: ExpiredTenant | null, proxy: string): string {
  const behavior = tenant?.expiredCallBehavior ?? 'DEAD_LINE'
  if (behavior === 'REDIRECT_SUPPORT' && tenant?.supportPhone) {
    return OPEN + '<Dial callerId="' + escapeXml(proxy) + '"><Number>' + escapeXml(tenant.supportPhone) +
      '</Number></Dial>' + CLOSE
  }
  if (behavior === 'PLAY_MESSAGE') return OPEN + '<Say>' + ENDED_MESSAGE + '</Say><Hangup/>' + CLOSE
  return OPEN + '<Say>' + OUT_OF_SERVICE_MESSAGE + '</Say><Hangup/>' + CLOSE
}

/** One call for the voice handler: decision → TeXML. `callId` is required for 'connect' only. */
export function decisionTexml(
  decision: RouteDecision,
  opts: { baseUrl: string; callId?: string | null; timeLimitSeconds?: number; callbackPrefix?: string },
): string {
  switch (decision.kind) {
    case 'connect': {
      if (!opts.callId) throw new Error('decisionTexml: callId is required to connect')
      return connectTexml({
        baseUrl: opts.baseUrl,
        callId: opts.callId,
        to: decision.to,
        callerId: decision.callerId,
        recording: decision.recording,
        consent: decision.consent,
        consentAudioUrl: decision.consentAudioUrl,
        ...(opts.timeLimitSeconds === undefined ? {} : { timeLimitSeconds: opts.timeLimitSeconds }),
        ...(opts.callbackPrefix === undefined ? {} : { callbackPrefix: opts.callbackPrefix }),
      })
    }
    case 'direction-not-allowed': return rejectTexml('rejected')
    case 'channel-not-allowed': return rejectTexml('rejected') // contract D10: a call on an SMS-only session
    case 'no-session': return expiredTexml(decision.tenant, decision.proxy)
    case 'unknown-proxy': return rejectTexml()
  }
}

/** The Telnyx dialect: callbacks under /v1/webhooks/cpaas, answered TeXML (api/cpaas/dialect.ts). */
export const TELNYX_DIALECT: Dialect = {
  provider: 'telnyx', prefix: CALLBACK_PREFIX, smsAnswer: 'json',
  answer: (decision, opts) => decisionTexml(decision, opts),
}
