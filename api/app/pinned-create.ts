// Pinned creates and number binding (docs/dual-proxy.md): what a façade with its own model of
// numbers (each participant with its own proxy, a pool of numbers per service) calls. Never
// reachable from the native POST /v1/sessions, which allocates.
import type { Engine } from '../../engine/index.js'
import { Channel, type E164, type SessionId, type SessionRecord, type TenantId } from '../../engine/types.js'
import { uuidv7 } from '../../sql/vocabulary/ids.js'
import { jsonbText } from '../../sql/jsonb-text.js'
import { bindNumber, unbindNumber, type BindResult, type UnbindResult } from '../../sql/number-binding.js'
import { createPinnedSession } from '../../sql/pinned-create.js'
import { loadNumberBindings } from '../../sql/number-pool.js'
import { isUuid } from '../../sql/cursor.js'
import type { Db } from '../../sql/transaction.js'
import { ApiProblem } from '../route.js'
import { E164_PATTERN } from '../schemas/common.js'
import { envelopesOf, type RunnerDeps } from './session-runner.js'

const E164_RE = new RegExp(E164_PATTERN)

export interface PinnedCreateInput {
  agentPhone: string
  customerPhone: string
  /** The agent's proxy: the number the agent dials, and the customer is presented from. */
  agentProxy: string
  /** The customer's proxy (the agent's too when equal: a native session). */
  customerProxy: string
  channels?: readonly ('voice' | 'sms')[]
  maxDurationMinutes?: number
  inactivityTimeoutMinutes?: number | null
  gracePeriodMinutes?: number
  metadata?: Record<string, unknown>
  /** The session id (a UUID), when the caller wants to know it up front; minted otherwise. */
  id?: string
  /** The caller's own writes, in the create's transaction (sql/pinned-create.ts). */
  within?: (tx: Db) => Promise<void>
}

/**
 * Creates a session on the numbers given. Throws ApiProblem: 'unauthorized' (unknown tenant),
 * 'validation' (same agent and customer), 'tier-session-limit', 'proxy-unavailable' (a number
 * neither bound to the tenant nor held by it), 'proxy-in-use' (a party already live on its number).
 */
export async function createPinned(d: RunnerDeps, tenantId: string, body: PinnedCreateInput): Promise<SessionRecord> {
  const tenant = await d.tenants.get(tenantId)
  if (!tenant) throw new ApiProblem('unauthorized')
  // Bad input changes nothing: checked before the engine or the store see it.
  for (const field of ['agentPhone', 'customerPhone', 'agentProxy', 'customerProxy'] as const) {
    if (!E164_RE.test(body[field])) throw new ApiProblem('validation', `${field} must be an E.164 number`, { errors: [{ field, issue: 'pattern' }] })
  }
  if (body.id !== undefined && !isUuid(body.id)) throw new ApiProblem('validation', 'id must be a UUID', { errors: [{ field: 'id', issue: 'pattern' }] })
  if (body.agentPhone === body.customerPhone) {
    throw new ApiProblem('validation', 'agentPhone and customerPhone must differ', { errors: [{ field: 'customerPhone', issue: 'same_as_agent' }] })
  }
  const now = d.now()
  const id = (body.id ?? uuidv7(now)) as SessionId
  const channels = body.channels === undefined ? undefined : (body.channels.includes('voice') ? Channel.VOICE : 0) | (body.channels.includes('sms') ? Channel.SMS : 0)
  const input = {
    id,
    tenantId: tenantId as TenantId,
    agentPhone: body.agentPhone as E164,
    customerPhone: body.customerPhone as E164,
    directionMode: 'BIDIRECTIONAL' as const,
    gracePeriodMinutes: body.gracePeriodMinutes ?? tenant.defaultGracePeriod,
    maxDurationMinutes: body.maxDurationMinutes ?? 120,
    recordingEnabled: false,
    consentPrompt: 'NONE' as const,
    ...(channels !== undefined ? { channels } : {}),
    ...(body.inactivityTimeoutMinutes != null ? { inactivityTimeoutMinutes: body.inactivityTimeoutMinutes } : {}),
    pinned: { agentProxy: body.agentProxy as E164, customerProxy: body.customerProxy as E164 },
  }
  let plan = d.engine.planCreate(input, now)
  if (!plan.ok && plan.rejection === 'proxy-unavailable') {
    // A binding made on another node: this node learns it from the store, and plans again.
    await refreshBindings(d, [body.agentProxy, body.customerProxy])
    plan = d.engine.planCreate(input, now)
  }
  if (!plan.ok) throw new ApiProblem(plan.rejection)
  const metadata = body.metadata ?? {}
  const envelopes = envelopesOf(plan.events)
  await d.flushRecords?.()
  const res = await createPinnedSession(d.db, {
    rec: plan.next,
    metadata,
    agentHash: d.hashParty(tenant.salt, input.agentPhone),
    customerHash: d.hashParty(tenant.salt, input.customerPhone),
    agentEnc: d.cipher.encrypt(input.agentPhone),
    customerEnc: d.cipher.encrypt(input.customerPhone),
    quota: tenant.concurrentSessions,
    events: envelopes,
    within: body.within,
  })
  if (res !== 'ok') throw new ApiProblem(res)
  try { d.engine.commit(plan) } catch { d.engine.load(plan.next) }
  if (body.metadata !== undefined) d.engine.live(id)?.setMetadata(jsonbText(metadata))
  d.hub.emit('session', id, plan.next.version, envelopes)
  return plan.next
}

/** Binds a number to the tenant (its pinned creates only) and tells this node's engine. */
export async function bindTenantNumber(d: Pick<RunnerDeps, 'db' | 'engine'>, tenantId: string, number: string): Promise<BindResult> {
  const res = await bindNumber(d.db, { number, tenantId })
  if (res === 'ok') d.engine.bindNumber(number, tenantId)
  return res
}

/** Gives a bound number back to native allocation; refused while sessions are live on it. */
export async function unbindTenantNumber(d: Pick<RunnerDeps, 'db' | 'engine'>, tenantId: string, number: string): Promise<UnbindResult> {
  const res = await unbindNumber(d.db, { number, tenantId })
  if (res === 'ok') d.engine.bindNumber(number, null)
  return res
}

async function refreshBindings(d: { db: RunnerDeps['db']; engine: Engine }, numbers: readonly string[]): Promise<void> {
  for (const n of await loadNumberBindings(d.db, numbers)) d.engine.bindNumber(n.number, n.boundTenantId)
}
