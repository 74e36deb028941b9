// Domain events the engine emits (contract 6, contract D6). An event carries ids, the proxy and the
// state, never a party's phone number: the type has no field that could hold one.
import type { E164, SessionId, SessionRecord, SessionState, TenantId } from './types.js'

export const ENGINE_EVENT_TYPES = [
  'session.created',
  'session.activated',
  'session.expired',
  'session.target_swapped',
] as const

export type EngineEventType = (typeof ENGINE_EVENT_TYPES)[number]

export interface EngineEvent {
  type: EngineEventType
  at: number
  sessionId: SessionId
  tenantId: TenantId
  proxyNumber: E164
  state: SessionState
}

export function eventOf(type: EngineEventType, at: number, rec: SessionRecord): EngineEvent {
  return { type, at, sessionId: rec.id, tenantId: rec.tenantId, proxyNumber: rec.proxyNumber, state: rec.state }
}
