// Push tokens and presence (contract 4.7, contract D9), keyed by tenant and the hashed userPhone:
// no real number is stored here.
import { sql, type CommonQueryMethods } from 'slonik'

export type Platform = 'ios' | 'android'
export type PresenceStatus = 'online' | 'background' | 'offline'

/**
 * Upsert keyed on the push token (repeating is safe). A token already registered by another
 * tenant is left alone: a tenant cannot take over another tenant's device.
 */
export async function upsertDeviceToken(db: CommonQueryMethods, d: { tenantId: string; userHash: string; token: string; platform: Platform; appBundleId: string | null }): Promise<void> {
  await db.query(sql.unsafe`
    INSERT INTO device_tokens (token, tenant_id, user_hash, platform, app_bundle_id, active)
    VALUES (${d.token}, ${d.tenantId}, ${d.userHash}, ${d.platform}, ${d.appBundleId}, true)
    ON CONFLICT (token) DO UPDATE SET user_hash = EXCLUDED.user_hash, platform = EXCLUDED.platform,
      app_bundle_id = EXCLUDED.app_bundle_id, active = true, updated_at = now()
    WHERE device_tokens.tenant_id = EXCLUDED.tenant_id`)
}

export async function deactivateDeviceToken(db: CommonQueryMethods, tenantId: string, token: string): Promise<void> {
  await db.query(sql.unsafe`UPDATE device_tokens SET active = false, updated_at = now() WHERE token = ${token} AND tenant_id = ${tenantId}`)
}

/** The latest report is the current presence (contract 3.2). */
export async function upsertPresence(db: CommonQueryMethods, p: { tenantId: string; userHash: string; status: PresenceStatus; platform: Platform; ts: number }): Promise<void> {
  await db.query(sql.unsafe`
    INSERT INTO device_presence (tenant_id, user_hash, status, platform, ts)
    VALUES (${p.tenantId}, ${p.userHash}, ${p.status}, ${p.platform}, ${p.ts})
    ON CONFLICT (tenant_id, user_hash) DO UPDATE SET status = EXCLUDED.status, platform = EXCLUDED.platform, ts = EXCLUDED.ts
    WHERE device_presence.ts <= EXCLUDED.ts`)
}

export async function getPresence(db: CommonQueryMethods, tenantId: string, userHash: string): Promise<{ status: PresenceStatus; platform: Platform; ts: number } | null> {
  const r = await db.maybeOne(sql.unsafe`
    SELECT status, platform, ts::float8 AS ts FROM device_presence WHERE tenant_id = ${tenantId} AND user_hash = ${userHash}`)
  return r ? { status: r.status, platform: r.platform, ts: Number(r.ts) } : null
}
