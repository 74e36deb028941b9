// Commands the engine plans and the callers persist before committing (style 3): a plan is data,
// computed without touching memory, so the store can refuse it and nothing needs undoing.
import type { EngineEvent } from './events.js'
import type { Rejection } from './rejections.js'
import type { ConsentPrompt, DirectionMode, E164, SessionId, SessionRecord, TenantId } from './types.js'

/** A validated POST /v1/sessions with the tenant's defaults applied (contract D4). */
export interface CreateInput {
  id: SessionId
  tenantId: TenantId
  agentPhone: E164
  customerPhone: E164
  directionMode: DirectionMode
  gracePeriodMinutes: number
  maxDurationMinutes: number
  recordingEnabled: boolean
  consentPrompt: ConsentPrompt
  /** contract D10: channel bits (types.ts Channel); absent: both. */
  channels?: number
  /** contract D10: absent or null: no inactivity timeout. */
  inactivityTimeoutMinutes?: number | null
  /**
   * stickyProxy (contract D10): the proxy this agent and customer last had with the tenant, tried
   * first; normal allocation when it cannot carry the session (held by another tenant, cooling
   * down, or a party live on it: the overlap rule).
   */
  preferProxy?: E164 | null
  /**
   * A pinned create (docs/dual-proxy.md): no allocation, the agent on agentProxy and the customer
   * on customerProxy; each must be bound to the tenant or held by it. Never from the native API.
   */
  pinned?: { agentProxy: E164; customerProxy: E164 }
}

/**
 * prev: the record the plan starts from (null for a create); next: the record to persist.
 * changed: whether next differs from prev (an idempotent swap or an empty patch does not); an
 * unchanged plan has next === prev and needs neither persisting nor committing.
 */
export type Plan =
  | { ok: true; prev: SessionRecord | null; next: SessionRecord; events: EngineEvent[]; changed: boolean }
  | { ok: false; rejection: Rejection }

export type OkPlan = Extract<Plan, { ok: true }>

const MINUTE = 60_000

/** The record of a new session on `proxy` (contract 3.1: ACTIVE at once, expiresAt the hard timeout). */
export function createdRecord(input: CreateInput, proxy: E164, now: number, customerProxy: E164 = proxy): SessionRecord {
  // Field by field: a record carries exactly its fields, whatever else the input object holds.
  return {
    id: input.id,
    tenantId: input.tenantId,
    proxyNumber: proxy,
    ...(customerProxy !== proxy ? { customerProxyNumber: customerProxy } : {}),
    state: 'ACTIVE',
    directionMode: input.directionMode,
    gracePeriodMinutes: input.gracePeriodMinutes,
    maxDurationMinutes: input.maxDurationMinutes,
    recordingEnabled: input.recordingEnabled,
    consentPrompt: input.consentPrompt,
    agentPhone: input.agentPhone,
    customerPhone: input.customerPhone,
    createdAt: now,
    activatedAt: now,
    expiresAt: now + input.maxDurationMinutes * MINUTE, // contract 3.1: the hard timeout
    endedAt: null,
    expiredAt: null,
    version: 1,
    ...(input.channels !== undefined ? { channels: input.channels } : {}),
    ...(input.inactivityTimeoutMinutes != null ? { inactivityTimeoutMinutes: input.inactivityTimeoutMinutes } : {}),
  }
}
