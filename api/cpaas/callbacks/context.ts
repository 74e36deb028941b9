// What every provider callback handler shares (contract 4.10, contract D5): its dependencies, the
// memory of recent provider ids, and the pieces more than one handler uses. The handlers are one a
// module beside this file (voice.ts, status.ts, dial-status.ts, recording.ts, sms.ts); handlers.ts
// binds them to one context and routes.ts gives them their paths.
// Signatures are checked by the HTTP pipeline before a handler runs (RouteDef.signed).
// No phone number or SMS text is ever logged or put into an event.
import type { Logger } from 'pino'
import type { Engine, LiveView, RouteDecision } from '../../../engine/index.js'
import type { CallDirection } from '../../../engine/types.js'
import { Recent } from '../../../engine/recent.js'
import type { ApiReply } from '../../route.js'
import { EMPTY_RESPONSE } from '../telnyx/texml.js'
import type { SmsProvider } from '../provider.js'
import type { Dialect } from '../dialect.js'
import type { CallInsert, RecordWriter } from '../../../sql/records.js'
import type { CallCounter } from '../../app/call-counter.js'
import type { TenantDirectory } from '../../app/tenant-directory.js'
import type { SmsCompliance, SmsOutcome } from '../sms/compliance.js'
import type { Intercept } from '../../twilio-proxy/intercept.js'
import type { OutOfSession } from '../../twilio-proxy/out-of-session.js'

export interface CallbackDeps {
  engine: Engine
  tenants: TenantDirectory
  hashParty: (salt: Buffer, e164: string) => string
  records: RecordWriter
  /** contract 2.2 callCount/lastCallAt in memory: told of each call this node routes (issue 13). */
  callCounter: CallCounter
  provider: SmsProvider
  /** The sandbox provider sends nothing and counts a forward as delivered (contract D1). */
  sandbox: boolean
  /** Read per callback: PUBLIC_BASE_URL, or the listener's URL once its port is bound. */
  publicBaseUrl: () => string
  log: Logger
  now: () => number
  /** How long an inbound SMS may wait for its forward before the answer is 503 (contract D5: 2 s). */
  smsBudgetMs?: number
  /** Issue #16: SMS keywords (STOP, START, HELP) and opt-outs; without it every message routes as before. */
  smsCompliance?: SmsCompliance
  /** A Twilio Proxy Service's intercept callback (api/twilio-proxy/intercept.ts); absent: none. */
  intercept?: Pick<Intercept, 'check' | 'has'>
  /** A Twilio Proxy Service's out-of-session callback (api/twilio-proxy/out-of-session.ts); absent: none. */
  outOfSession?: Pick<OutOfSession, 'check'>
  /** Counts each voice and SMS routing outcome (metrics). */
  countCallback?: (channel: 'voice' | 'sms', outcome: 'routed' | 'rejected' | 'expired_behaviour' | 'unknown_proxy') => void
}

/** The dependencies and the state the handlers of one process share. */
export interface CallbackContext {
  d: CallbackDeps
  /** The provider these callbacks come from: where its callbacks go, how it is answered. */
  dialect: Dialect
  /** Recent provider ids → our ids: a replayed voice fetch gets the same callId and changes nothing. */
  calls: Recent<string>
  /** Inbound message ids whose forward is settled (handed over, dropped for good, or found done). */
  forwarded: Recent<true>
  /** Forwards under way, so a provider retry waits for the same one instead of starting another. */
  forwarding: Map<string, Promise<SmsOutcome>>
}

const RECENT_MAX = 100_000
/** A provider retries a callback within seconds (its own timeout): ids older than this are forgotten (engine/recent.ts). */
const RECENT_MS = 10 * 60_000

export function createCallbackContext(d: CallbackDeps, dialect: Dialect): CallbackContext {
  const recent = <V>() => new Recent<V>(RECENT_MAX, { maxAgeMs: RECENT_MS, now: d.now })
  return { d, dialect, calls: recent<string>(), forwarded: recent<true>(), forwarding: new Map() }
}

export const OUTCOME = {
  'connect': 'routed', 'direction-not-allowed': 'rejected', 'channel-not-allowed': 'rejected', 'no-session': 'expired_behaviour', 'unknown-proxy': 'unknown_proxy',
} as const

/** A decision naming a session: routed, or refused by its direction mode or (issue #16) its channels. */
export type Matched = Extract<RouteDecision, { kind: 'connect' | 'direction-not-allowed' | 'channel-not-allowed' }>

export function matched(dec: RouteDecision): dec is Matched {
  return dec.kind === 'connect' || dec.kind === 'direction-not-allowed' || dec.kind === 'channel-not-allowed'
}

export const XML = 'application/xml'
export const JSON_TYPE = 'application/json; charset=utf-8'
/** A voice callback missing what it must carry. */
export const BAD_VOICE: ApiReply = { status: 400, body: EMPTY_RESPONSE, contentType: XML }
export const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/** The epoch ms in a UUIDv7 (its first 48 bits). */
export function uuidTime(id: string): number {
  return parseInt(id.slice(0, 8) + id.slice(9, 13), 16)
}

/**
 * Party B's hash: remembered on the live session after its first call (an HMAC is about ten Map
 * lookups). `live`: the session, when the caller already looked it up (the voice fetch does, once);
 * undefined looks it up.
 */
export function partyBHash({ d }: CallbackContext, dec: Matched, caller: string, live = d.engine.live(dec.sessionId)): string {
  // party B: the customer. A_TO_B dials them (or, refused, was placed by the agent); B_TO_A is them calling.
  const partyB = dec.direction === 'B_TO_A' ? caller : dec.kind === 'connect' ? dec.to : d.engine.get(dec.sessionId)?.customerPhone
  if (partyB === undefined) return ''
  const known = live?.customerHash(partyB)
  if (known) return known
  const tenant = d.tenants.peek(dec.tenantId)
  if (!tenant) return ''
  const hash = d.hashParty(tenant.salt, partyB)
  live?.rememberCustomerHash(partyB, hash)
  return hash
}

/** The call record as the voice fetch writes it, for a decision the engine made on `caller`'s call. */
export function callRow(ctx: CallbackContext, dec: Matched, caller: string, direction: CallDirection, proxy: string, callId: string, callSid: string, at: number, live?: LiveView): CallInsert {
  return {
    id: callId, sessionId: dec.sessionId, tenantId: dec.tenantId, providerCallId: callSid, status: 'RINGING', direction,
    initiatedAt: at, partyBHash: partyBHash(ctx, dec, caller, live), proxy,
    recordingConsentPlayed: dec.kind === 'connect' && dec.recording,
  }
}
