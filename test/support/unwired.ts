// The Services members a route-level harness does not build (it serves a few route modules, not
// the service): what a lone node without those parts would do — no pool counts, no providers, no
// other node or webhook dispatcher to tell — and session commands that throw when reached.
import type { Services, SessionCommands } from '../../api/services.js'

export type Unwired = Pick<Services, 'sessions' | 'poolCounts' | 'cpaasHealth' | 'onTenantChanged' | 'webhookDispatcher'>

export function unwired(): Unwired {
  const sessions = new Proxy({}, { get(_, name) { throw new Error(`session commands are not wired in this harness (${String(name)})`) } }) as SessionCommands
  return { sessions, poolCounts: () => [], cpaasHealth: () => [], onTenantChanged: () => {}, webhookDispatcher: { wake() {} } }
}
