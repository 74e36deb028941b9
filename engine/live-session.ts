// The in-memory form of a live session, kept small because a node holds a million of them
// (bench/route.bench.ts measures the heap per session). Compared with a SessionRecord it drops what
// memory can derive: tenant and proxy are shared objects, the four enums and the recording flag
// pack into one small integer, activatedAt is null while it equals createdAt (always, for sessions
// the engine creates), expiredAt is always null (an expired session leaves memory). Every number
// that can exceed a small integer costs a heap box, so only createdAt and expiresAt are always set.
import type { ProxyNumber } from './number-pool.js'
import type { TenantSlot } from './tenant-slot.js'
import type { ConsentPrompt, DirectionMode, E164, SessionId, SessionRecord, SessionState } from './types.js'

const STATES: readonly SessionState[] = ['PENDING', 'ACTIVE', 'GRACE_PERIOD']
const MODES: readonly DirectionMode[] = ['BIDIRECTIONAL', 'A_TO_B_ONLY', 'B_TO_A_ONLY']
const CONSENTS: readonly ConsentPrompt[] = ['DEFAULT', 'CUSTOM', 'NONE']

// flags: bits 0-1 state, 2-3 direction mode, 4-5 consent prompt, 6 recording.
export const STATE_PENDING = 0
export const MODE_A_TO_B_ONLY = 1
export const MODE_B_TO_A_ONLY = 2
export const CONSENT_CUSTOM = 1
export const RECORDING = 64

function packFlags(rec: SessionRecord): number {
  return STATES.indexOf(rec.state) | (MODES.indexOf(rec.directionMode) << 2) |
    (CONSENTS.indexOf(rec.consentPrompt) << 4) | (rec.recordingEnabled ? RECORDING : 0)
}

export function consentOf(flags: number): ConsentPrompt { return CONSENTS[(flags >> 4) & 3] }

export class LiveSession {
  // Declaration order is memory order: what route() reads comes first, to share cache lines.
  flags: number
  expiresAt: number
  agent: E164
  customer: E164
  readonly tenant: TenantSlot
  readonly id: SessionId
  readonly proxy: ProxyNumber
  grace: number
  maxDuration: number
  createdAt: number
  activatedAt: number | null
  endedAt: number | null
  version: number
  heapPos = -1

  constructor(rec: SessionRecord, proxy: ProxyNumber, tenant: TenantSlot) {
    this.id = rec.id
    this.proxy = proxy
    this.tenant = tenant
    this.agent = rec.agentPhone
    this.customer = rec.customerPhone
    this.flags = packFlags(rec)
    this.grace = rec.gracePeriodMinutes
    this.maxDuration = rec.maxDurationMinutes
    this.createdAt = rec.createdAt
    this.activatedAt = rec.activatedAt === rec.createdAt ? null : rec.activatedAt
    this.expiresAt = rec.expiresAt
    this.endedAt = rec.endedAt
    this.version = rec.version
  }

  /** Takes the mutable fields of a newer version of the same session (identity fields stay). */
  assign(rec: SessionRecord): void {
    this.agent = rec.agentPhone
    this.customer = rec.customerPhone
    this.flags = packFlags(rec)
    this.grace = rec.gracePeriodMinutes
    this.maxDuration = rec.maxDurationMinutes
    this.createdAt = rec.createdAt
    this.activatedAt = rec.activatedAt === rec.createdAt ? null : rec.activatedAt
    this.expiresAt = rec.expiresAt
    this.endedAt = rec.endedAt
    this.version = rec.version
  }

  toRecord(): SessionRecord {
    const f = this.flags
    return {
      id: this.id,
      tenantId: this.tenant.routing.id,
      proxyNumber: this.proxy.number,
      state: STATES[f & 3],
      directionMode: MODES[(f >> 2) & 3],
      gracePeriodMinutes: this.grace,
      maxDurationMinutes: this.maxDuration,
      recordingEnabled: (f & RECORDING) !== 0,
      consentPrompt: CONSENTS[(f >> 4) & 3],
      agentPhone: this.agent,
      customerPhone: this.customer,
      createdAt: this.createdAt,
      activatedAt: this.activatedAt ?? this.createdAt,
      expiresAt: this.expiresAt,
      endedAt: this.endedAt,
      expiredAt: null,
      version: this.version,
    }
  }
}
