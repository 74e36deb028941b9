// Commands the engine plans and the callers persist before committing (STYLE 3): a plan is data,
// computed without touching memory, so the store can refuse it and nothing needs undoing.
import type { EngineEvent } from './events.js'
import type { Rejection } from './rejections.js'
import type { ConsentPrompt, DirectionMode, E164, SessionId, SessionRecord, TenantId } from './types.js'

/** A validated POST /v1/sessions with the tenant's defaults applied (DECISIONS 4). */
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
