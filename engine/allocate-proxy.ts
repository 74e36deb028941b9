// Proxy choice for a new session (contract 3.1 uniqueness rule, contract D4). A number in use belongs
// to one tenant, and no number may carry two live sessions sharing a participant. Region comes
// first ("a proxy is chosen in the customer's country, else the agent's, else any region with
// capacity": a customer should not have to dial abroad while a local number is free); within a
// region a number the tenant already holds comes before a free one:
//   1. for the customer's region, then the agent's: a number the tenant holds there on which
//      neither party is live (a few round-robin tries, so a create stays O(1) at a million
//      sessions), else a free number there (idle and out of cooldown: the head of the region's
//      free list, which is ordered by release time);
//   2. any other region: a number the tenant holds, else a free number;
//   3. before answering pool-exhausted, every number the tenant holds. A valid number is never
//      missed; the bounded tries may only pick a less preferred number where a held one would do.
import type { NumberPool, ProxyNumber, RegionPool } from './number-pool.js'
import type { PartyIndex } from './party-index.js'
import { regionOf } from './region.js'
import type { ProxyRing, TenantSlot } from './tenant-slot.js'

/** Round-robin tries per region over the tenant's numbers before turning to free numbers. */
export const RING_TRIES = 16

export interface AllocationRequest {
  index: PartyIndex
  tenant: TenantSlot
  /** e164Key of each party. */
  agent: number
  customer: number
  /** Preferred regions, best first (customer's, agent's); the rest follow in pool order. */
  regions: readonly string[]
  now: number
  exclude: ReadonlySet<string> | undefined
  /** stickyProxy (contract D10): tried before everything else, under the same rules. */
  prefer?: string | null | undefined
}

export function allocateProxy(pool: NumberPool, req: AllocationRequest): ProxyNumber | null {
  const { tenant, regions } = req
  if (req.prefer) {
    const p = pool.numbers.get(req.prefer)
    // Held by this tenant, or free and out of cooldown (contract D4: one tenant per number in
    // use; contract 3.1 cooldown), and neither party live on it (the overlap rule).
    if (p !== undefined && (p.live > 0 ? p.owner === tenant : pool.isAvailable(p, req.now)) && fits(p, req)) return p
  }
  for (const name of regions) {
    const r = pool.regions.get(name)
    if (r === undefined) continue
    const ring = tenant.rings.get(r)
    const p = (ring === undefined ? null : searchRing(ring, req, RING_TRIES)) ?? firstFree(pool, r, req)
    if (p !== null) return p
  }
  for (const [r, ring] of tenant.rings) {
    const p = regions.includes(r.name) ? null : searchRing(ring, req, RING_TRIES)
    if (p !== null) return p
  }
  for (const r of pool.regions.values()) {
    const p = regions.includes(r.name) ? null : firstFree(pool, r, req)
    if (p !== null) return p
  }
  for (const ring of tenant.rings.values()) {
    const p = searchRing(ring, req, ring.items.length)
    if (p !== null) return p
  }
  return null
}

function fits(p: ProxyNumber, req: AllocationRequest): boolean {
  // A bound number (docs/dual-proxy.md) is its tenant's pinned creates' only; it can sit in the
  // tenant's ring while they hold it.
  return p.bound === null && (req.exclude === undefined || !req.exclude.has(p.number)) &&
    (p.live === 0 || (req.index.find(p.key, req.agent) < 0 && req.index.find(p.key, req.customer) < 0))
}

function searchRing(ring: ProxyRing, req: AllocationRequest, tries: number): ProxyNumber | null {
  const items = ring.items
  const n = items.length
  for (let k = 0, i = ring.cursor % n; k < tries && k < n; k++, i = i + 1 === n ? 0 : i + 1) {
    const p = items[i]!
    if (fits(p, req)) return p
  }
  return null
}

function firstFree(pool: NumberPool, r: RegionPool, req: AllocationRequest): ProxyNumber | null {
  // In release order: the first number still cooling down ends the search.
  for (let p = r.head; p !== null && pool.isAvailable(p, req.now); p = p.nextFree) {
    if (fits(p, req)) return p
  }
  return null
}

/** Contract D4: the customer's country, else the agent's, else any region. */
export function preferredRegions(customer: string, agent: string): string[] {
  const c = regionOf(customer)
  const a = regionOf(agent)
  const out: string[] = []
  if (c !== null) out.push(c)
  if (a !== null && a !== c) out.push(a)
  return out
}
