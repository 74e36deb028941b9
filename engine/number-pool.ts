// The proxy numbers: who holds each and which are free. Counts per region and provider are kept
// incrementally (contract 2.9, contract D4), so reading them costs only a walk over the numbers still
// cooling down. Which callers a number routes is the PartyIndex's business.
import { e164Key } from './party-index.js'
import type { TenantSlot } from './tenant-slot.js'
import type { E164 } from './types.js'

class PoolGroup {
  total = 0
  inUse = 0
  readonly region: string
  readonly provider: string
  constructor(region: string, provider: string) {
    this.region = region
    this.provider = provider
  }
}

export class ProxyNumber {
  readonly number: E164
  /** The number's digits, its key in the PartyIndex. */
  readonly key: number
  readonly region: RegionPool
  readonly group: PoolGroup
  /** The tenant holding the number while live > 0, then the last holder (routing of strangers). */
  owner: TenantSlot | null = null
  /**
   * The tenant (id) the number is bound to (docs/dual-proxy.md): only that tenant's pinned creates
   * use it; native allocation never does, and it is outside the pool's free list and counts.
   */
  bound: string | null = null
  /** Live sessions on the number. */
  live = 0
  /** When the last session left; -Infinity for a never-used number. */
  releasedAt = -Infinity
  // Free list (ordered by releasedAt) and the owner's ring of in-use numbers.
  prevFree: ProxyNumber | null = null
  nextFree: ProxyNumber | null = null
  ringPos = -1

  constructor(number: E164, region: RegionPool, group: PoolGroup) {
    this.number = number
    this.key = e164Key(number)
    this.region = region
    this.group = group
  }
}

/** The free numbers of one region, oldest release first: the head is the first to leave cooldown. */
export class RegionPool {
  head: ProxyNumber | null = null
  tail: ProxyNumber | null = null
  readonly name: string
  constructor(name: string) {
    this.name = name
  }

  /** Insert keeping release order; releases arrive in time order, so this is O(1) in practice. */
  insertFree(p: ProxyNumber): void {
    let after = this.tail
    while (after !== null && after.releasedAt > p.releasedAt) after = after.prevFree
    p.prevFree = after
    p.nextFree = after === null ? this.head : after.nextFree
    if (p.nextFree === null) this.tail = p
    else p.nextFree.prevFree = p
    if (after === null) this.head = p
    else after.nextFree = p
  }

  removeFree(p: ProxyNumber): void {
    if (p.prevFree === null) this.head = p.nextFree
    else p.prevFree.nextFree = p.nextFree
    if (p.nextFree === null) this.tail = p.prevFree
    else p.nextFree.prevFree = p.prevFree
    p.prevFree = p.nextFree = null
  }
}

/** A pool number as the store lists it (Engine.addNumbers). */
export interface PoolEntry {
  number: E164; region: string; provider: string; releasedAt?: number | null; lastTenantId?: string | null; boundTenantId?: string | null
}

export class NumberPool {
  readonly numbers = new Map<string, ProxyNumber>()
  readonly regions = new Map<string, RegionPool>()
  readonly #groups = new Map<string, PoolGroup>()

  readonly cooldownMs: number
  constructor(cooldownMs: number) {
    this.cooldownMs = cooldownMs
  }

  /** `releasedAt` and `owner` restore a number's cooldown and last holder at boot. */
  add(number: E164, region: string, provider: string, releasedAt = -Infinity, owner: TenantSlot | null = null): ProxyNumber {
    const known = this.numbers.get(number)
    if (known !== undefined) return known
    if (e164Key(number) === 0) throw new Error('engine: a pool number must be E.164')
    let r = this.regions.get(region)
    if (r === undefined) this.regions.set(region, r = new RegionPool(region))
    const key = `${region}\u0000${provider}`
    let g = this.#groups.get(key)
    if (g === undefined) this.#groups.set(key, g = new PoolGroup(region, provider))
    const p = new ProxyNumber(number, r, g)
    p.releasedAt = releasedAt
    p.owner = owner
    g.total++
    this.numbers.set(number, p)
    r.insertFree(p) // ordered by releasedAt: set it first
    return p
  }

  /** Contract 3.1: a released number cools down before anyone may take it again. */
  isAvailable(p: ProxyNumber, now: number): boolean {
    return p.live === 0 && p.releasedAt + this.cooldownMs <= now
  }

  /** A session starts using p. The first one takes the number off the free list for its tenant. */
  acquire(p: ProxyNumber, tenant: TenantSlot): void {
    if (p.live++ === 0) {
      if (p.bound === null) {
        p.region.removeFree(p)
        p.group.inUse++
      }
      p.owner = tenant
      tenant.addProxy(p)
    }
  }

  /** A session stops using p at `at`; the last one sends the number into cooldown from then. */
  release(p: ProxyNumber, at: number): void {
    if (--p.live === 0) {
      p.releasedAt = at
      p.owner?.removeProxy(p)
      if (p.bound === null) {
        p.group.inUse--
        p.region.insertFree(p)
      }
    }
  }

  /** Binds p to a tenant (or unbinds it: null): in or out of the free list and the counts. */
  bind(p: ProxyNumber, tenantId: string | null): void {
    if ((p.bound === null) === (tenantId === null)) {
      p.bound = tenantId // unbound stays unbound; bound moves (the store refuses what must not)
      return
    }
    const delta = tenantId === null ? 1 : -1
    p.group.total += delta
    if (p.live > 0) p.group.inUse += delta
    else if (tenantId === null) p.region.insertFree(p)
    else p.region.removeFree(p)
    p.bound = tenantId
  }

  counts(now: number): Array<{ region: string; provider: string; total: number; available: number; inUse: number; cooldown: number }> {
    const cooling = new Map<PoolGroup, number>()
    for (const r of this.regions.values()) {
      // Newest releases sit at the tail; stop at the first number out of cooldown.
      for (let p = r.tail; p !== null && p.releasedAt + this.cooldownMs > now; p = p.prevFree) {
        cooling.set(p.group, (cooling.get(p.group) ?? 0) + 1)
      }
    }
    return [...this.#groups.values()].map(g => {
      const cooldown = cooling.get(g) ?? 0
      return { region: g.region, provider: g.provider, total: g.total, available: g.total - g.inUse - cooldown, inUse: g.inUse, cooldown }
    })
  }
}
