// What an inbound call or SMS on a proxy should do (contract 3.1, contract D4-D5). Computed on the
// hot path: one probe of the PartyIndex, the session's flags and deadline, one small object.
import {
  CONSENT_CUSTOM, MODE_A_TO_B_ONLY, MODE_B_TO_A_ONLY, NO_SMS, NO_VOICE, RECORDING, STATE_PENDING, consentOf,
  type LiveSession,
} from './live-session.js'
import type { NumberPool } from './number-pool.js'
import { e164Key, type PartyIndex } from './party-index.js'
import type { CallDirection, ConsentPrompt, E164, SessionId, TenantId, TenantRouting } from './types.js'

export type RouteDecision =
  | {
    kind: 'connect'
    sessionId: SessionId
    tenantId: TenantId
    direction: CallDirection
    /** The other party's real number: dial it or forward to it. */
    to: E164
    /**
     * The called party's own proxy, shown to it: the number the caller dialled, except in a
     * dual-proxy session (docs/dual-proxy.md), where each party sees the other from its own proxy.
     */
    callerId: E164
    recording: boolean
    consent: ConsentPrompt
    /** The tenant's custom consent audio when consent is CUSTOM, else null. */
    consentAudioUrl: string | null
  }
  | { kind: 'direction-not-allowed'; sessionId: SessionId; tenantId: TenantId; direction: CallDirection }
  /** contract D10: the session does not carry this channel (a call on an SMS-only session, or the reverse). */
  | { kind: 'channel-not-allowed'; sessionId: SessionId; tenantId: TenantId; direction: CallDirection }
  /**
   * A pool number on which this caller has no routable session (expired, swapped away, stranger):
   * apply tenant.expiredCallBehavior. tenant holds or last held the number; null if never used.
   */
  | { kind: 'no-session'; proxy: E164; tenant: TenantRouting | null }
  | { kind: 'unknown-proxy' }

const UNKNOWN_PROXY: RouteDecision = Object.freeze({ kind: 'unknown-proxy' })

export type RouteChannel = 'voice' | 'sms'

export function routeCall(pool: NumberPool, index: PartyIndex, proxy: string, caller: string, now: number, channel: RouteChannel = 'voice'): RouteDecision {
  const slot = index.find(e164Key(proxy), e164Key(caller))
  if (slot < 0) return noSession(pool, proxy)
  const s = index.sessionAt(slot)
  // Routable: ACTIVE or GRACE_PERIOD (not PENDING) and before expiresAt (contract D4), even if
  // the expiry tick has not run yet.
  if ((s.flags & 3) === STATE_PENDING || now >= s.expiresAt) return noSession(pool, proxy)
  // contract D10: the channel before the direction: a session without it refuses either party.
  if ((s.flags & (channel === 'sms' ? NO_SMS : NO_VOICE)) !== 0) {
    return { kind: 'channel-not-allowed', sessionId: s.id, tenantId: s.tenant.routing.id, direction: index.isAgentAt(slot) ? 'A_TO_B' : 'B_TO_A' }
  }
  const mode = (s.flags >> 2) & 3
  // contract 3.1: A_TO_B_ONLY lets only the agent call out, B_TO_A_ONLY only party B.
  if (index.isAgentAt(slot)) {
    return mode === MODE_B_TO_A_ONLY ? notAllowed(s, 'A_TO_B') : connect(s, s.customerProxy.number, 'A_TO_B', s.customer)
  }
  return mode === MODE_A_TO_B_ONLY ? notAllowed(s, 'B_TO_A') : connect(s, s.proxy.number, 'B_TO_A', s.agent)
}

function noSession(pool: NumberPool, proxy: string): RouteDecision {
  const p = pool.numbers.get(proxy)
  if (p === undefined) return UNKNOWN_PROXY
  return { kind: 'no-session', proxy: p.number, tenant: p.owner === null ? null : p.owner.routing }
}

/** callerId: the target's proxy (the one the caller dialled unless the session is dual-proxy). */
function connect(s: LiveSession, callerId: E164, direction: CallDirection, to: E164): RouteDecision {
  const routing = s.tenant.routing
  const custom = ((s.flags >> 4) & 3) === CONSENT_CUSTOM
  return {
    kind: 'connect',
    sessionId: s.id,
    tenantId: routing.id,
    direction,
    to,
    callerId,
    recording: (s.flags & RECORDING) !== 0,
    consent: consentOf(s.flags),
    consentAudioUrl: custom ? routing.recordingConsentAudioUrl : null,
  }
}

function notAllowed(s: LiveSession, direction: CallDirection): RouteDecision {
  return { kind: 'direction-not-allowed', sessionId: s.id, tenantId: s.tenant.routing.id, direction }
}
