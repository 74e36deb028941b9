// A tenant as the engine holds it: the routing config every one of its sessions shares (so a
// config change routes at once), its live-session count (contract 8.2 quota) and, per region, a ring
// of the proxy numbers it holds, walked round-robin when allocating (contract D4).
import type { ProxyNumber, RegionPool } from './number-pool.js'
import type { TenantId, TenantRouting } from './types.js'

export class ProxyRing {
  readonly items: ProxyNumber[] = []
  cursor = 0
}

export class TenantSlot {
  live = 0
  readonly rings = new Map<RegionPool, ProxyRing>()

  routing: TenantRouting
  constructor(routing: TenantRouting) {
    this.routing = routing
  }

  addProxy(p: ProxyNumber): void {
    let ring = this.rings.get(p.region)
    if (ring === undefined) this.rings.set(p.region, ring = new ProxyRing())
    p.ringPos = ring.items.length
    ring.items.push(p)
  }

  /** O(1): the last number of the ring takes the place of the removed one. */
  removeProxy(p: ProxyNumber): void {
    const ring = this.rings.get(p.region)
    if (ring === undefined || ring.items[p.ringPos] !== p) return
    const last = ring.items.pop() as ProxyNumber
    if (last !== p) {
      ring.items[p.ringPos] = last
      last.ringPos = p.ringPos
    }
    p.ringPos = -1
    if (ring.items.length === 0) this.rings.delete(p.region)
  }

  /** Spread the next allocations: start after the number just used. */
  advance(p: ProxyNumber): void {
    const ring = this.rings.get(p.region)
    if (ring !== undefined && ring.items[p.ringPos] === p) ring.cursor = p.ringPos + 1
  }
}

/**
 * The tenants, by id, holding a number of `pool`: those with a live session in its region (a
 * number is held by one tenant while it has live sessions, and a ring holds exactly those). The
 * pool alert's recipients in O(tenants), where a DISTINCT over every live session in Postgres took
 * 0.4-0.9 s at a million sessions (bench/RESULTS.md, "What moved the figures", a8888cc).
 */
export function tenantsHolding(slots: Iterable<TenantSlot>, pool: RegionPool | undefined): TenantId[] {
  const ids: TenantId[] = []
  if (pool === undefined) return ids
  for (const slot of slots) if (slot.rings.has(pool)) ids.push(slot.routing.id)
  return ids.sort()
}
