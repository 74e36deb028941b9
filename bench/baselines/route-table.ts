// The same synthetic population the bench loads into the service: session i binds agent(i) and
// customer(i) on proxy(i % proxies). Deterministic so the load generator can target live pairs.
export const PROXIES_PER_10_SESSIONS = 1

export function proxyOf(i: number, proxies: number): string { return '+1202' + String(5_000_000 + (i % proxies)).padStart(7, '0') }
export function agentOf(i: number): string { return '+1303' + String(1_000_000 + i).padStart(7, '0') }
export function customerOf(i: number): string { return '+1404' + String(1_000_000 + i).padStart(7, '0') }
export function proxiesFor(sessions: number): number { return Math.max(1, Math.ceil(sessions / 10)) }

export function routeTable(sessions: number): Map<string, Map<string, string>> {
  const proxies = proxiesFor(sessions)
  const t = new Map<string, Map<string, string>>()
  for (let i = 0; i < sessions; i++) {
    const p = proxyOf(i, proxies)
    let m = t.get(p)
    if (!m) t.set(p, m = new Map())
    m.set(agentOf(i), customerOf(i))
    m.set(customerOf(i), agentOf(i))
  }
  return t
}
