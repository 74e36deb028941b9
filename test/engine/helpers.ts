// Shared fixtures of the engine tests: a simulated clock (style 7), fictional numbers from the
// ranges reserved for drama (contract D2), and create/end/swap helpers over the public API.
import {
  Engine, TIER_LIMITS, expiryEvent,
  type CreateInput, type E164, type EngineEvent, type OkPlan, type Plan, type SessionId, type SessionMsg,
  type SessionRecord, type TenantId, type TenantRouting,
} from '../../engine/index.js'

export const MINUTE = 60_000
export const T0 = 1_767_225_600_000 // 2026-01-01T00:00:00Z

export class FakeClock {
  now: number
  constructor(now = T0) {
    this.now = now
  }

  advance(ms: number): number {
    this.now += ms
    return this.now
  }
}

export const e164 = (s: string) => s as E164

/** +1 202 555 01xx (US) and +44 7700 900xxx (GB): fictional ranges. */
export const us = (n: number) => e164(`+1202555${String(100 + n).padStart(4, '0')}`)
export const gb = (n: number) => e164(`+447700900${String(n).padStart(3, '0')}`)
/** Canada: +1 416 555 01xx. */
export const ca = (n: number) => e164(`+1416555${String(100 + n).padStart(4, '0')}`)

export const AGENT = us(50)
export const CUSTOMER = us(60)

export function tenant(id: string, over: Partial<TenantRouting> = {}): TenantRouting {
  return {
    id: id as TenantId,
    tier: 'STARTER',
    expiredCallBehavior: 'DEAD_LINE',
    supportPhone: null,
    recordingConsentAudioUrl: null,
    ...over,
  }
}

export const TENANT_A = tenant('0190a000-0000-7000-8000-00000000000a')
export const TENANT_B = tenant('0190a000-0000-7000-8000-00000000000b')

let seq = 0
export function sessionId(): SessionId {
  seq++
  return `0190b000-0000-7000-8000-${String(seq).padStart(12, '0')}` as SessionId
}

export function input(over: Partial<CreateInput> = {}): CreateInput {
  return {
    id: sessionId(),
    tenantId: TENANT_A.id,
    agentPhone: AGENT,
    customerPhone: CUSTOMER,
    directionMode: 'BIDIRECTIONAL',
    gracePeriodMinutes: 15,
    maxDurationMinutes: 120,
    recordingEnabled: false,
    consentPrompt: 'DEFAULT',
    ...over,
  }
}

export interface Harness {
  engine: Engine
  clock: FakeClock
  events: EngineEvent[]
  create(over?: Partial<CreateInput>, exclude?: ReadonlySet<string>): SessionRecord
  /** engine.commit, collecting the plan's events when it applied (as production announces them). */
  commit(plan: OkPlan): boolean
  /** plan + commit of one message on a live session; returns the plan. */
  send(id: SessionId, m: SessionMsg): Plan
  tick(): SessionRecord[]
}

export interface HarnessOptions {
  numbers?: Array<{ number: E164; region: string; provider: string }>
  cooldownMs?: number
  limits?: typeof TIER_LIMITS
  tenants?: TenantRouting[]
}

/** Three US numbers and two GB numbers by default; tenants A and B. */
export function harness(opts: HarnessOptions = {}): Harness {
  const clock = new FakeClock()
  const engine = new Engine({ cooldownMs: opts.cooldownMs ?? 15 * MINUTE, ...(opts.limits ? { limits: opts.limits } : {}) })
  for (const t of opts.tenants ?? [TENANT_A, TENANT_B]) engine.upsertTenant(t)
  engine.addNumbers(opts.numbers ?? [
    { number: us(0), region: 'US', provider: 'telnyx' },
    { number: us(1), region: 'US', provider: 'telnyx' },
    { number: us(2), region: 'US', provider: 'telnyx' },
    { number: gb(0), region: 'GB', provider: 'telnyx' },
    { number: gb(1), region: 'GB', provider: 'telnyx' },
  ])
  // What production announces: a committed plan's events, and expiryEvent of each expired record
  // (api/app/session-runner.ts).
  const events: EngineEvent[] = []
  const commit = (plan: OkPlan): boolean => {
    const applied = engine.commit(plan)
    if (applied) events.push(...plan.events)
    return applied
  }
  return {
    engine,
    clock,
    events,
    commit,
    create(over = {}, exclude) {
      const plan = engine.planCreate(input(over), clock.now, exclude)
      if (!plan.ok) throw new Error(`create refused: ${plan.rejection}`)
      commit(plan)
      return plan.next
    },
    send(id, m) {
      const rec = engine.get(id)
      if (rec === undefined) throw new Error(`session ${id} not live`)
      const plan = engine.plan(rec, m, clock.now)
      if (plan.ok) commit(plan)
      return plan
    },
    tick: () => {
      const expired = engine.tick(clock.now)
      for (const r of expired) events.push(expiryEvent(r))
      return expired
    },
  }
}

export function ok(plan: Plan): OkPlan {
  if (!plan.ok) throw new Error(`expected an ok plan, got ${plan.rejection}`)
  return plan
}

/** A SessionRecord as the store would hold it, for step() and load() tests. */
export function record(over: Partial<SessionRecord> = {}): SessionRecord {
  return {
    id: sessionId(),
    tenantId: TENANT_A.id,
    proxyNumber: us(0),
    state: 'ACTIVE',
    directionMode: 'BIDIRECTIONAL',
    gracePeriodMinutes: 15,
    maxDurationMinutes: 120,
    recordingEnabled: false,
    consentPrompt: 'DEFAULT',
    agentPhone: AGENT,
    customerPhone: CUSTOMER,
    createdAt: T0,
    activatedAt: T0,
    expiresAt: T0 + 120 * MINUTE,
    endedAt: null,
    expiredAt: null,
    version: 1,
    ...over,
  }
}
