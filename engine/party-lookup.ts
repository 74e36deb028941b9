// GET /v1/sessions/verify from memory (contract D4): the newest routable session of a tenant that a
// number takes part in. The PartyIndex is keyed by (proxy, party), so the tenant's proxies in use
// are probed one by one: a few hundred lookups for a large tenant, against a Postgres round trip.
import type { LiveSession } from './live-session.js'
import { STATE_PENDING } from './live-session.js'
import { e164Key, type PartyIndex } from './party-index.js'
import type { TenantSlot } from './tenant-slot.js'

export function newestByParty(tenant: TenantSlot, index: PartyIndex, party: string): LiveSession | undefined {
  const key = e164Key(party)
  if (key === 0) return undefined
  let best: LiveSession | undefined
  for (const ring of tenant.rings.values()) {
    for (const p of ring.items) {
      const s = index.get(p.key, key)
      // contract 4.2: ACTIVE or GRACE_PERIOD, as the store's query (state IN live AND state <> PENDING).
      if (s === undefined || s.tenant !== tenant || (s.flags & 3) === STATE_PENDING) continue
      if (best === undefined || s.createdAt > best.createdAt || (s.createdAt === best.createdAt && s.id > best.id)) best = s
    }
  }
  return best
}
