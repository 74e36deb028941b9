// The numbers of a pinned create (docs/dual-proxy.md): no allocation, the caller names the agent's
// proxy and the customer's. Each must be bound to the tenant (its pool of pinned numbers, cooldown
// or not: nobody else may take it) or held by the tenant's live sessions and not bound elsewhere,
// and neither party may already be live on its own number (the overlap rule, per (proxy, party)
// as the store's session_participants key).
import type { NumberPool, ProxyNumber } from './number-pool.js'
import { e164Key, type PartyIndex } from './party-index.js'
import type { Rejection } from './rejections.js'
import type { TenantSlot } from './tenant-slot.js'
import type { E164 } from './types.js'

/** [the agent's proxy, the customer's], or why they cannot carry the session. */
export function pinnedProxies(pool: NumberPool, index: PartyIndex, tenant: TenantSlot,
  parties: { agentPhone: E164; customerPhone: E164 }, pinned: { agentProxy: E164; customerProxy: E164 }): [ProxyNumber, ProxyNumber] | Rejection {
  const agent = pool.numbers.get(pinned.agentProxy)
  const customer = pool.numbers.get(pinned.customerProxy)
  if (agent === undefined || customer === undefined || !usable(agent, tenant) || !usable(customer, tenant)) return 'proxy-unavailable'
  if (index.find(agent.key, e164Key(parties.agentPhone)) >= 0 || index.find(customer.key, e164Key(parties.customerPhone)) >= 0) return 'proxy-in-use'
  return [agent, customer]
}

function usable(p: ProxyNumber, tenant: TenantSlot): boolean {
  if (p.bound !== null) return p.bound === tenant.routing.id && (p.live === 0 || p.owner === tenant)
  return p.live > 0 && p.owner === tenant
}
