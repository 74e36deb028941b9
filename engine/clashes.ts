// The live sessions a record going live may not coexist with (contract 3.1, contract D4): another
// tenant's on one of its numbers, or one with a party on the same (proxy, party) key. A
// dual-proxy session (docs/dual-proxy.md) has the agent on proxy and the customer on cproxy.
import { IndexConflictError } from './errors.js'
import type { IdMap } from './id-map.js'
import type { LiveSession } from './live-session.js'
import type { ProxyNumber } from './number-pool.js'
import { e164Key, type PartyIndex } from './party-index.js'
import type { TenantSlot } from './tenant-slot.js'
import type { SessionRecord } from './types.js'

const NO_CLASHES: LiveSession[] = []

/** Strict (commit): throws instead, before anything changed. */
export function clashesOf(sessions: IdMap<LiveSession>, index: PartyIndex,
  at: { proxy: ProxyNumber; cproxy: ProxyNumber; tenant: TenantSlot }, rec: SessionRecord, strict: boolean): LiveSession[] {
  const { proxy, cproxy, tenant } = at
  if (proxy.live === 0 && cproxy.live === 0) return NO_CLASHES
  if ((proxy.live > 0 && proxy.owner !== tenant) || (cproxy.live > 0 && cproxy.owner !== tenant)) {
    if (strict) throw new IndexConflictError(rec.id, `a proxy of it is held by tenant ${(proxy.owner !== tenant ? proxy : cproxy).owner?.routing.id}`)
    // Only a load() of a record the store knows better gets here: a full scan is fine.
    const taken = new Set([proxy, cproxy].filter(p => p.live > 0 && p.owner !== tenant))
    return [...sessions.values()].filter(s => s.id !== rec.id && (taken.has(s.proxy) || taken.has(s.customerProxy)))
  }
  const a = index.get(proxy.key, e164Key(rec.agentPhone))
  const c = index.get(cproxy.key, e164Key(rec.customerPhone))
  const clashA = a !== undefined && a.id !== rec.id
  const clashC = c !== undefined && c.id !== rec.id && c !== a
  if (!clashA && !clashC) return NO_CLASHES // no array per call: every session a boot loads gets here
  const out = clashA && clashC ? [a, c] : clashA ? [a] : [c!]
  if (strict) throw new IndexConflictError(rec.id, `shares a party on its proxy with ${out.map(s => s.id).join(', ')}`)
  return out
}
