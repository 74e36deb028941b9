// Shared vocabulary (test/layering.test.ts): a leaf every layer may import, sql/ included; it
// imports nothing of ours but its sibling and engine/.
import { uuidv7 } from './ids.js'
import { isoTime } from './iso-time.js'

// contract D6: the one envelope for webhooks and the WebSocket stream. `data` is built from an
// allow-list of fields, so a real phone number or SMS text cannot reach a tenant by accident.
export type EventType =
  | 'session.created' | 'session.activated' | 'session.expired' | 'session.target_swapped'
  | 'call.incoming' | 'call.answered' | 'call.ended' | 'call.failed'
  | 'sms.sent' | 'sms.received' | 'sms.blocked'
  | 'pool.low'

/**
 * The names POST /v1/webhooks accepts: contract 6's nine, sms.blocked (contract D11: an SMS dropped
 * because its sender opted out or the session does not carry SMS) and pool.low (contract D12: a
 * region's free proxy numbers fell below 20/10/5 %, or recovered above 25 %);
 * session.target_swapped is always delivered.
 */
export const SUBSCRIBABLE_EVENTS = [
  'session.created', 'session.activated', 'session.expired',
  'call.incoming', 'call.answered', 'call.ended', 'call.failed',
  'sms.sent', 'sms.received', 'sms.blocked',
  'pool.low',
] as const satisfies readonly EventType[]

/** Every type an envelope can carry: the nine subscribable ones and session.target_swapped (the stream sends them all). */
export const EVENT_TYPES = [...SUBSCRIBABLE_EVENTS, 'session.target_swapped'] as const satisfies readonly EventType[]

/**
 * Every event names its tenant; every event of a session (all but pool.low) also has sessionId
 * and proxyNumber. pool.low (contract D12) is about a region, not a session: region and counts only.
 */
export interface EventData {
  sessionId?: string
  tenantId: string
  proxyNumber?: string
  state?: string
  timestamp?: string
  callId?: string
  direction?: string
  status?: string
  durationSeconds?: number
  smsId?: string
  /** sms.blocked: why the message was dropped (`opted_out`, `channel`). */
  reason?: string
  /** pool.low: the region, the threshold crossed (20, 10, 5 down; 25 on recovery) and its counts now. */
  region?: string
  threshold?: number
  total?: number
  available?: number
  inUse?: number
  cooldown?: number
  test?: true
}

export interface EventEnvelope {
  id: string
  type: EventType
  createdAt: string
  data: EventData
}

const DATA_KEYS = ['sessionId', 'tenantId', 'proxyNumber', 'state', 'timestamp', 'callId', 'direction',
  'status', 'durationSeconds', 'smsId', 'reason', 'region', 'threshold', 'total', 'available', 'inUse', 'cooldown', 'test'] as const

/** A new event, its id a UUIDv7 minted at `at` (so ids order events in time). */
export function newEnvelope(type: EventType, at: number, data: EventData): EventEnvelope {
  return buildEnvelope(uuidv7(at), type, at, data)
}

/** What every call.* event says (contract D6). */
export interface CallEventData {
  sessionId: string
  tenantId: string
  proxyNumber: string
  callId: string
  direction: string
  status: string
  durationSeconds: number
}

/**
 * A call.* event, for the hot paths (a voice fetch, a status callback): the same envelope as
 * newEnvelope(type, at, data) gives for these seven fields, in its key order, copied by name
 * instead of through buildEnvelope's walk of every allowed key (that walk was ~5 % of a recorded
 * call's CPU in the voice bench, bench/RESULTS.md, "What moved the figures", 2941a3d).
 */
export function callEnvelope(type: 'call.incoming' | 'call.answered' | 'call.ended' | 'call.failed', at: number, d: CallEventData): EventEnvelope {
  // The id is minted now, as the record batch is written, not at `at` (the call's start, the
  // provider's callback time): a resumed stream takes ids in the order they commit, within its
  // settle time (gateway/stream/settle.ts). createdAt says when it happened.
  return {
    id: uuidv7(), type, createdAt: isoTime(at),
    data: {
      sessionId: d.sessionId, tenantId: d.tenantId, proxyNumber: d.proxyNumber, callId: d.callId,
      direction: d.direction, status: d.status, durationSeconds: d.durationSeconds,
    },
  }
}

export function buildEnvelope(id: string, type: EventType, at: number, data: EventData): EventEnvelope {
  const clean: Record<string, unknown> = {}
  for (const k of DATA_KEYS) if (data[k] !== undefined) clean[k] = data[k]
  return { id, type, createdAt: isoTime(at), data: clean as unknown as EventData }
}
