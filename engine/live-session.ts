// The in-memory form of a live session, kept small because a node holds a million of them
// (bench/route.bench.ts measures the heap per session). Compared with a SessionRecord it drops what
// memory can derive: tenant and proxy are shared objects, the four enums and the recording flag
// pack into one small integer, activatedAt is null while it equals createdAt (always, for sessions
// the engine creates), expiredAt is always null (an expired session leaves memory). Every number
// that can exceed a small integer costs a heap box, so only createdAt and expiresAt are always set.
import type { ProxyNumber } from './number-pool.js'
import type { TenantSlot } from './tenant-slot.js'
import { ALL_CHANNELS, Channel, type ConsentPrompt, type DirectionMode, type E164, type SessionId, type SessionRecord, type SessionState } from './types.js'

const EMPTY_METADATA = '{}'

/** What a live session shows besides its record (contract 2.2): metadata and its call counters. */
export interface SessionExtras {
  /** The metadata as JSON text, keys in Postgres's jsonb order. */
  metadataJson: string
  callCount: number
  lastCallAt: number | null
}

/** A live session as GET /v1/sessions/:id shows it (contract D4: answered from memory). */
export interface LiveSnapshot extends SessionExtras {
  record: SessionRecord
}

/** What the gateway reads and changes of a live session besides its record (Engine.live). */
export interface LiveView {
  readonly id: SessionId
  snapshot(): LiveSnapshot
  /** The metadata a committed create or PATCH stored (JSON text, jsonb key order). */
  setMetadata(json: string): void
  /**
   * A call of this session is being recorded: counted at once, before its record reaches
   * Postgres. Returns the lastCallAt it replaced, for unnoteCall.
   */
  noteCall(at: number): number | null
  /** Takes back a noteCall whose record Postgres did not insert (a replayed CallSid, a refusal). */
  unnoteCall(at: number, prevLastCallAt: number | null): void
  /**
   * A call or SMS of this session at `at` (contract D10: the inactivity clock). A field update, no
   * re-arming: the engine re-checks it when the armed deadline comes (Engine.tick).
   */
  noteActivity(at: number): void
  /**
   * The party-B hash of `customer` (call records' party_b_hash) if it was remembered for this
   * session and `customer` is still its customer; else null.
   */
  customerHash(customer: string): string | null
  /** Remembers the hash of `customer`, if that is still this session's customer. */
  rememberCustomerHash(customer: string, hash: string): void
}

const STATES: readonly SessionState[] = ['PENDING', 'ACTIVE', 'GRACE_PERIOD']
const MODES: readonly DirectionMode[] = ['BIDIRECTIONAL', 'A_TO_B_ONLY', 'B_TO_A_ONLY']
const CONSENTS: readonly ConsentPrompt[] = ['DEFAULT', 'CUSTOM', 'NONE']

// flags: bits 0-1 state, 2-3 direction mode, 4-5 consent prompt, 6 recording, 7-8 the channels
// a session does NOT carry (contract D10: 0, the default, is both), 9-22 the inactivity timeout in
// minutes (0: none; 10,080 < 2^14), 23 an inactivity end handed out and not yet settled. Still a
// small integer (under 2^30): no heap box per session.
export const STATE_PENDING = 0
const STATE_ACTIVE = 1
export const MODE_A_TO_B_ONLY = 1
export const MODE_B_TO_A_ONLY = 2
export const CONSENT_CUSTOM = 1
export const RECORDING = 64
export const NO_VOICE = 128
export const NO_SMS = 256
const IDLE_SHIFT = 9
const IDLE_MASK = 0x3fff
export const IDLE_PENDING = 1 << 23

function packFlags(rec: SessionRecord): number {
  const channels = rec.channels ?? ALL_CHANNELS
  return STATES.indexOf(rec.state) | (MODES.indexOf(rec.directionMode) << 2) |
    (CONSENTS.indexOf(rec.consentPrompt) << 4) | (rec.recordingEnabled ? RECORDING : 0) |
    ((channels & Channel.VOICE) === 0 ? NO_VOICE : 0) | ((channels & Channel.SMS) === 0 ? NO_SMS : 0) |
    (((rec.inactivityTimeoutMinutes ?? 0) & IDLE_MASK) << IDLE_SHIFT)
}

export function consentOf(flags: number): ConsentPrompt { return CONSENTS[(flags >> 4) & 3]! }

export class LiveSession implements LiveView {
  // Declaration order is memory order: what route() reads comes first, to share cache lines.
  flags: number
  expiresAt: number
  agent: E164
  customer: E164
  readonly tenant: TenantSlot
  readonly id: SessionId
  /** The agent's proxy. */
  readonly proxy: ProxyNumber
  /** The customer's proxy: the same object as proxy except in a dual-proxy session. */
  readonly customerProxy: ProxyNumber
  grace: number
  maxDuration: number
  createdAt: number
  activatedAt: number | null
  endedAt: number | null
  version: number
  heapPos = -1
  // What GET /v1/sessions/:id shows besides the record (reads of live sessions come
  // from memory). metadata is kept as its JSON text in Postgres's key order (one shared string when
  // empty) and parsed per read: reads are far rarer than the memory a parsed object would hold.
  metadata = EMPTY_METADATA
  callCount = 0
  lastCallAt: number | null = null
  /**
   * contract D10: the last call or SMS this node knows of (or the PATCH that set the timeout), in
   * whole seconds after createdAt, rounded up: a small integer, so no heap box at 1M sessions.
   * A lower bound: activity seen only by other nodes may be missing, and the store has the last
   * word before an inactivity end is written (api/app/session-runner.ts).
   */
  activeSec = 0
  /**
   * The customer's party hash (an HMAC under the tenant's salt, which the engine does not hold),
   * remembered by the gateway at the session's first call so that later calls need neither the
   * HMAC nor a cache of their own; dropped when the customer changes. Null until then:
   * a pointer per session, the string only for sessions that had a call.
   */
  #customerHash: string | null = null

  constructor(rec: SessionRecord, proxy: ProxyNumber, tenant: TenantSlot, customerProxy: ProxyNumber = proxy) {
    this.id = rec.id
    this.proxy = proxy
    this.customerProxy = customerProxy
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
    if (rec.customerPhone !== this.customer) this.#customerHash = null
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

  snapshot(): LiveSnapshot {
    return { record: this.toRecord(), metadataJson: this.metadata, callCount: this.callCount, lastCallAt: this.lastCallAt }
  }

  setMetadata(json: string): void {
    this.metadata = json === EMPTY_METADATA ? EMPTY_METADATA : json
  }

  noteCall(at: number): number | null {
    const prev = this.lastCallAt
    this.callCount++
    if (prev === null || at > prev) this.lastCallAt = at
    this.noteActivity(at)
    return prev
  }

  noteActivity(at: number): void {
    const sec = Math.ceil((at - this.createdAt) / 1000)
    if (sec > this.activeSec) this.activeSec = sec
  }

  customerHash(customer: string): string | null {
    return customer === this.customer ? this.#customerHash : null
  }

  rememberCustomerHash(customer: string, hash: string): void {
    if (customer === this.customer) this.#customerHash = hash
  }

  /** Minutes of inactivity that end this session; 0: none. */
  get idleMinutes(): number {
    return (this.flags >> IDLE_SHIFT) & IDLE_MASK
  }

  /**
   * When this session ends for inactivity as far as this node knows (contract D10): ACTIVE only (an
   * ended session is in its grace period already), not while an end is being written.
   */
  idleAt(): number {
    const m = this.idleMinutes
    if (m === 0 || (this.flags & 3) !== STATE_ACTIVE || (this.flags & IDLE_PENDING) !== 0) return Infinity
    return this.createdAt + this.activeSec * 1000 + m * 60_000
  }

  /** The expiry heap's key: the hard deadline (or grace end), or the inactivity deadline if sooner. */
  dueAt(): number {
    const idle = this.idleAt()
    return idle < this.expiresAt ? idle : this.expiresAt
  }

  unnoteCall(at: number, prevLastCallAt: number | null): void {
    if (this.callCount > 0) this.callCount--
    if (this.lastCallAt === at) this.lastCallAt = prevLastCallAt // a later call moved it on and keeps it
  }

  /**
   * What Postgres held at `version`: its metadata goes with that version; the call counters only
   * grow (this node may have counted calls whose records are still being written behind).
   */
  absorb(version: number, x: SessionExtras): void {
    if (this.version === version) this.setMetadata(x.metadataJson)
    if (x.callCount > this.callCount) this.callCount = x.callCount
    if (x.lastCallAt !== null && (this.lastCallAt === null || x.lastCallAt > this.lastCallAt)) this.lastCallAt = x.lastCallAt
    if (x.lastCallAt !== null) this.noteActivity(x.lastCallAt)
  }

  toRecord(): SessionRecord {
    const f = this.flags
    return {
      id: this.id,
      tenantId: this.tenant.routing.id,
      proxyNumber: this.proxy.number,
      ...(this.customerProxy !== this.proxy ? { customerProxyNumber: this.customerProxy.number } : {}),
      state: STATES[f & 3]!,
      directionMode: MODES[(f >> 2) & 3]!,
      gracePeriodMinutes: this.grace,
      maxDurationMinutes: this.maxDuration,
      recordingEnabled: (f & RECORDING) !== 0,
      consentPrompt: CONSENTS[(f >> 4) & 3]!,
      agentPhone: this.agent,
      customerPhone: this.customer,
      createdAt: this.createdAt,
      activatedAt: this.activatedAt ?? this.createdAt,
      expiresAt: this.expiresAt,
      endedAt: this.endedAt,
      expiredAt: null,
      version: this.version,
      // contract D10: present only when set (absent means the defaults: both channels, no timeout).
      ...((f & (NO_VOICE | NO_SMS)) !== 0 ? { channels: ALL_CHANNELS ^ ((f & NO_VOICE) !== 0 ? Channel.VOICE : 0) ^ ((f & NO_SMS) !== 0 ? Channel.SMS : 0) } : {}),
      ...(this.idleMinutes !== 0 ? { inactivityTimeoutMinutes: this.idleMinutes } : {}),
    }
  }
}
