// The routing engine of one node: every live session in memory, indexed by proxy and caller for
// routing, by id for commands, and by deadline for expiry. Pure: it never reads a clock or does
// I/O. Commands are planned (no mutation), persisted by the caller, then committed; only commit()
// and tick() change memory and emit events (style 1, 3).
import { allocateProxy, preferredRegions } from './allocate-proxy.js'
import { clashesOf } from './clashes.js'
import { UnknownTenantError } from './errors.js'
import { eventOf } from './events.js'
import { ExpiryHeap } from './expiry-heap.js'
import { IdMap } from './id-map.js'
import { IdleQueue } from './idle-queue.js'
import { LiveSession, type LiveView, type SessionExtras } from './live-session.js'
import { NumberPool, type PoolEntry, type ProxyNumber } from './number-pool.js'
import { PartyIndex, e164Key } from './party-index.js'
import { newestByParty } from './party-lookup.js'
import { pinnedProxies } from './pinned-proxies.js'
import { createdRecord, type CreateInput, type OkPlan, type Plan } from './plan.js'
import { regionOf } from './region.js'
import { routeCall, type RouteChannel, type RouteDecision } from './route-decision.js'
import { expire, isLive, step, type SessionMsg } from './session.js'
import { TenantSlot, tenantsHolding } from './tenant-slot.js'
import { Tombstones } from './tombstones.js'
import { TIER_LIMITS, type E164, type SessionId, type SessionRecord, type TenantId, type TenantRouting } from './types.js'

export interface EngineOptions {
  /** NUMBER_COOLDOWN_SECONDS × 1000 (contract 3.1). */
  cooldownMs: number
  limits?: typeof TIER_LIMITS
  /** How long a session that left memory is remembered, to refuse its stale versions. */
  tombstoneMs?: number
}

export type PoolCount = { region: string; provider: string; total: number; available: number; inUse: number; cooldown: number }

const MINUTE = 60_000

export class Engine {
  readonly #pool: NumberPool
  readonly #limits: typeof TIER_LIMITS
  readonly #tenants = new Map<string, TenantSlot>()
  readonly #sessions = new IdMap<LiveSession>()
  readonly #index = new PartyIndex()
  readonly #timers = new ExpiryHeap<LiveSession>(s => s.dueAt())
  readonly #idle = new IdleQueue()
  readonly #tombstones: Tombstones
  #clock = -Infinity // the latest `now` given to tick(); stamps tombstones
  #applied: LiveSession | undefined = undefined // what the last #apply left holding its id: load() looks once

  constructor(opts: EngineOptions) {
    this.#pool = new NumberPool(opts.cooldownMs)
    this.#limits = opts.limits ?? TIER_LIMITS
    this.#tombstones = new Tombstones(opts.tombstoneMs ?? 15 * MINUTE)
  }

  /** Sessions share the slot, so a changed config (expiredCallBehavior, consent audio) routes at once. */
  upsertTenant(t: TenantRouting): void {
    const slot = this.#tenants.get(t.id)
    if (slot === undefined) this.#tenants.set(t.id, new TenantSlot(t))
    else slot.routing = t
  }

  /**
   * Idempotent. At boot, `releasedAt` (cooldown start), `lastTenantId` (whose expired behaviour
   * a call to a released number gets) and `boundTenantId` restore what the store remembers.
   */
  addNumbers(nums: ReadonlyArray<PoolEntry>): void {
    for (const n of nums) {
      const owner = n.lastTenantId ? this.#tenants.get(n.lastTenantId) ?? null : null
      const p = this.#pool.add(n.number, n.region, n.provider, n.releasedAt ?? -Infinity, owner)
      if (n.boundTenantId !== undefined) this.#pool.bind(p, n.boundTenantId)
    }
  }

  /**
   * docs/dual-proxy.md: the number is bound to the tenant (its pinned creates only; native
   * allocation skips it), or no longer bound (null). The store decides whether it may be (sql/
   * number-binding.ts); this node follows. False for a number this node does not know.
   */
  bindNumber(number: string, tenantId: string | null): boolean {
    const p = this.#pool.numbers.get(number)
    if (p === undefined) return false
    this.#pool.bind(p, tenantId)
    return true
  }

  planCreate(input: CreateInput, now: number, exclude?: ReadonlySet<string>): Plan {
    const tenant = this.#tenant(input.tenantId)
    // contract 8.2: PENDING, ACTIVE and GRACE_PERIOD sessions count.
    if (tenant.live >= this.#limits[tenant.routing.tier].concurrentSessions) return { ok: false, rejection: 'tier-session-limit' }
    const got = input.pinned !== undefined ? pinnedProxies(this.#pool, this.#index, tenant, input, input.pinned) : allocateProxy(this.#pool, {
      index: this.#index,
      tenant,
      agent: e164Key(input.agentPhone),
      customer: e164Key(input.customerPhone),
      regions: preferredRegions(input.customerPhone, input.agentPhone),
      now,
      exclude,
      prefer: input.preferProxy,
    })
    if (got === null || typeof got === 'string') return { ok: false, rejection: got ?? 'pool-exhausted' }
    const [agentProxy, customerProxy] = Array.isArray(got) ? got : [got, got]
    const next = createdRecord(input, agentProxy.number, now, customerProxy.number)
    const events = [eventOf('session.created', now, next), eventOf('session.activated', now, next)]
    return { ok: true, prev: null, next, events, changed: true }
  }

  /** step() plus the checks that need the index. Works on records not held in memory too. */
  plan(rec: SessionRecord, m: SessionMsg, now: number): Plan {
    const r = step(rec, m, now)
    if (!r.ok) return { ok: false, rejection: r.rejection }
    if (r.changed && m.type === 'swap-target') {
      // contract 4.2: the new target may not take part in another live session on the same proxy.
      const other = this.#index.get(e164Key(rec.customerProxyNumber ?? rec.proxyNumber), e164Key(m.customerPhone))
      if (other !== undefined && other.id !== rec.id) return { ok: false, rejection: 'target-conflict' }
    }
    return { ok: true, prev: rec, next: r.next, events: r.events, changed: r.changed }
  }

  /**
   * Applies a persisted plan; false when its version is not newer than the one held (or than a
   * session's final version) and nothing changed, so committing twice is harmless. The plan's
   * events are the caller's to announce, once it has persisted them.
   * Throws IndexConflictError, changing nothing, if the plan clashes with a live session.
   */
  commit(plan: OkPlan): boolean {
    return this.#apply(plan.next, true)
  }

  /** Boot: room for about this many live sessions before load() (a hint; any number still fits). */
  reserve(sessions: number): void { this.#index.reserve(2 * sessions) }

  /**
   * Boot and cross-node sync: upsert by version, drop the session if it is no longer live. The
   * store is the truth, so live sessions the record clashes with are dropped. Emits nothing.
   */
  load(rec: SessionRecord, extras?: SessionExtras): void {
    this.#apply(rec, false)
    if (extras !== undefined) this.#applied?.absorb(rec.version, extras)
  }

  /**
   * Expires every live session due at `now`, earliest deadline first; returns the EXPIRED records
   * for the caller to persist and announce (expiryEvent). `max` bounds the work of one call (a
   * burst of a million deadlines would otherwise block the event loop for seconds): call again
   * while it returns `max` records.
   * Due sessions stop routing at expiresAt whether or not the tick has run.
   */
  tick(now: number, max = Infinity): SessionRecord[] {
    if (now > this.#clock) this.#clock = now
    const expired: SessionRecord[] = []
    for (let s = this.#timers.peek(), n = 0; s !== undefined && this.#timers.peekKey() <= now && n < max; s = this.#timers.peek(), n++) {
      if (s.expiresAt <= now) {
        const next = expire(s.toRecord(), now).next // the timer-fired row of step(): held sessions are live
        this.#remove(s, now)
        this.#tombstones.add(s.id, next.version, now)
        expired.push(next)
        continue
      }
      this.#idle.check(s, now) // contract D10: an inactivity deadline, checked lazily (idle-queue.ts)
      this.#timers.update(s)
    }
    this.#tombstones.prune(now)
    return expired
  }

  /** contract D10: the ACTIVE sessions tick() found idle, each once; the caller ends them if the store
   * (which knows every node's activity) agrees, else calls resumeIdle (engine/idle-queue.ts). */
  idleDue(): SessionRecord[] {
    return this.#idle.drain(s => this.#sessions.get(s.id) === s)
  }

  /** contract D10: an inactivity end not written (later activity at `activeAt`, or no store): re-armed. */
  resumeIdle(id: SessionId, activeAt: number | null): void {
    const s = this.#sessions.get(id)
    if (s === undefined) return
    this.#idle.resume(s, activeAt)
    this.#timers.update(s)
  }

  /** The hot path of every inbound call and SMS. */
  route(proxy: string, caller: string, now: number, channel: RouteChannel = 'voice'): RouteDecision {
    return routeCall(this.#pool, this.#index, proxy, caller, now, channel)
  }

  /** A live session (PENDING, ACTIVE, GRACE_PERIOD); ended ones are in the store only. */
  get(id: SessionId): SessionRecord | undefined {
    return this.#sessions.get(id)?.toRecord()
  }

  /** A live session's metadata and call counters (contract D4: reads from memory); undefined when not live here. */
  live(id: SessionId): LiveView | undefined {
    return this.#sessions.get(id)
  }

  /** The newest ACTIVE or GRACE_PERIOD session of the tenant this number takes part in. */
  findByParty(tenantId: string, party: string): LiveView | undefined {
    const slot = this.#tenants.get(tenantId)
    return slot === undefined ? undefined : newestByParty(slot, this.#index, party)
  }

  liveCount(tenantId: string): number { return this.#tenants.get(tenantId)?.live ?? 0 }

  poolCounts(now: number): PoolCount[] { return this.#pool.counts(now) }

  /** The provider a proxy number belongs to (proxy_numbers.provider): which one sends from it. */
  numberProvider(number: string): string | undefined { return this.#pool.numbers.get(number as E164)?.group.provider }

  /** The pool alert's recipients: the tenants with a live session in the region (tenantsHolding). */
  tenantsLiveIn(region: string): TenantId[] { return tenantsHolding(this.#tenants.values(), this.#pool.regions.get(region)) }

  size(): number { return this.#sessions.size }

  #tenant(id: string): TenantSlot {
    const slot = this.#tenants.get(id)
    if (slot === undefined) throw new UnknownTenantError(id)
    return slot
  }

  /** Returns false when the record is stale and nothing changed. */
  #apply(rec: SessionRecord, strict: boolean): boolean {
    let held = this.#applied = this.#sessions.get(rec.id)
    if (held !== undefined ? rec.version <= held.version : this.#tombstones.covers(rec.id, rec.version)) return false
    if (!isLive(rec.state)) {
      const at = rec.expiredAt ?? rec.endedAt ?? rec.expiresAt
      if (held !== undefined) this.#remove(held, at)
      this.#applied = undefined
      this.#tombstones.add(rec.id, rec.version, Math.max(at, this.#clock))
      return true
    }
    const tenant = this.#tenant(rec.tenantId)
    const cnum = rec.customerProxyNumber ?? rec.proxyNumber
    if (e164Key(rec.agentPhone) === 0 || e164Key(rec.customerPhone) === 0 || e164Key(rec.proxyNumber) === 0 || e164Key(cnum) === 0) {
      throw new Error(`engine: session ${rec.id} has a number that is not E.164`)
    }
    const proxy = this.#number(rec.proxyNumber)
    const cproxy = cnum === rec.proxyNumber ? proxy : this.#number(cnum)
    const clashes = clashesOf(this.#sessions, this.#index, { proxy, cproxy, tenant }, rec, strict)
    if (held !== undefined && (held.proxy !== proxy || held.customerProxy !== cproxy || held.tenant !== tenant)) {
      this.#remove(held, this.#clock) // sessions never move; a record saying otherwise starts over
      held = undefined
    }
    for (const s of clashes) this.#remove(s, this.#clock)
    if (held === undefined) this.#applied = this.#insert(rec, proxy, tenant, cproxy)
    else this.#update(held, rec)
    return true
  }

  /** A live session on a number no longer configured keeps routing until it expires. */
  #number(n: E164): ProxyNumber {
    return this.#pool.numbers.get(n) ?? this.#pool.add(n, regionOf(n) ?? 'unknown', 'unknown')
  }

  #insert(rec: SessionRecord, proxy: ProxyNumber, tenant: TenantSlot, cproxy: ProxyNumber): LiveSession {
    const s = new LiveSession(rec, proxy, tenant, cproxy)
    this.#pool.acquire(proxy, tenant)
    if (cproxy !== proxy) this.#pool.acquire(cproxy, tenant) // both numbers held, as one would be
    tenant.advance(proxy)
    this.#wire(s)
    tenant.live++
    this.#sessions.set(s.id, s)
    this.#timers.push(s)
    return s
  }

  #update(s: LiveSession, rec: SessionRecord): void {
    this.#unwire(s) // a swap unwires the previous customer at once (contract 3.1)
    s.assign(rec)
    this.#wire(s)
    this.#timers.update(s) // expiresAt, the state or the inactivity timeout may have moved its deadline
  }

  /** Out of memory: unwired, quota down, the proxy released into cooldown from `at`. */
  #remove(s: LiveSession, at: number): void {
    this.#sessions.delete(s.id)
    this.#timers.remove(s)
    this.#unwire(s)
    s.tenant.live--
    this.#pool.release(s.proxy, at)
    if (s.customerProxy !== s.proxy) this.#pool.release(s.customerProxy, at)
  }

  #wire(s: LiveSession): void {
    this.#index.set(s.proxy.key, e164Key(s.agent), true, s)
    this.#index.set(s.customerProxy.key, e164Key(s.customer), false, s)
  }

  #unwire(s: LiveSession): void {
    this.#index.delete(s.proxy.key, e164Key(s.agent), s)
    this.#index.delete(s.customerProxy.key, e164Key(s.customer), s)
  }
}
