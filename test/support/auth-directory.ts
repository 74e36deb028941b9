// An AuthDirectory over a function of the tenant id, for tests and benches without a database:
// it answers what the tenant directory (api/app/tenant-directory.ts) would hold at that moment, so
// a change made through `meta` applies at once, as the real directory's changes do. No API
// credentials: every token exchange is refused. `changed` calls are recorded.
import type { AuthDirectory, TenantMeta } from '../../api/auth/authenticate.js'

export function fixedDirectory(meta: (id: string) => TenantMeta | null): AuthDirectory & { changes: string[] } {
  const changes: string[] = []
  return {
    peekTenant: id => meta(id) ?? undefined,
    tenant: async id => meta(id),
    credential: () => null,
    changed: t => { changes.push(t.id) },
    changes,
  }
}

/** Every tenant id is an ACTIVE tenant of `tier`. */
export function activeTenants(tier: TenantMeta['tier']): AuthDirectory {
  return fixedDirectory(id => ({ id, status: 'ACTIVE', tier, salt: Buffer.alloc(32) }))
}
