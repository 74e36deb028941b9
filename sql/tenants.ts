// Tenants, users and API credentials (contract 2.1, 4.1, 4.4; contract D3). Timestamps come out as
// ISO strings formatted by Postgres, so the result does not depend on the pool's type parsers.
import { sql, type CommonQueryMethods, type DatabasePool } from 'slonik'
import { toStoreError } from './errors.js'
import type { ConsentPrompt, ExpiredCallBehavior, Tier } from '../engine/types.js'

export type TenantStatus = 'ACTIVE' | 'SUSPENDED'
export type UserRole = 'OWNER' | 'ADMIN' | 'OPERATOR'

/** What the tenant directory keeps of a tenant (api/app/tenant-directory.ts): state, defaults, routing. */
export interface TenantState {
  id: string
  tier: Tier
  status: TenantStatus
  salt: Buffer
  defaultGracePeriod: number
  recordingEnabled: boolean
  recordingConsentMode: ConsentPrompt
  expiredCallBehavior: ExpiredCallBehavior
  supportPhone: string | null
  recordingConsentAudioUrl: string | null
  /** contract D11: the STOP confirmation and HELP answer sent from a proxy; null: the default text. */
  smsOptOutText: string | null
  smsHelpText: string | null
}

/** A live (not revoked) API credential: what a token exchange checks (contract D3). */
export interface ApiCredential { id: string; tenantId: string; keyHash: Buffer; secretMac: Buffer }

export interface TenantRow {
  id: string
  name: string
  tier: Tier
  status: TenantStatus
  webhookUrl: string | null
  defaultGracePeriod: number
  expiredCallBehavior: ExpiredCallBehavior
  supportPhone: string | null
  recordingEnabled: boolean
  recordingConsentMode: ConsentPrompt
  recordingConsentAudioUrl: string | null
  pushConfig: Record<string, unknown>
  smsOptOutText: string | null
  smsHelpText: string | null
  createdAt: string
  updatedAt: string
}

// The webhook URL registered through POST /v1/webhooks wins over the one set by PATCH /v1/config
// (contract 4.9: one URL per tenant); PATCH /v1/config writes both.
const TENANT_COLUMNS = sql.fragment`
  t.id, t.name, t.tier, t.status,
  COALESCE(wc.url, t.webhook_url) AS "webhookUrl",
  t.default_grace_period AS "defaultGracePeriod",
  t.expired_call_behavior AS "expiredCallBehavior",
  t.support_phone AS "supportPhone",
  t.recording_enabled AS "recordingEnabled",
  t.recording_consent_mode AS "recordingConsentMode",
  t.recording_consent_audio_url AS "recordingConsentAudioUrl",
  t.push_config AS "pushConfig",
  t.sms_opt_out_text AS "smsOptOutText",
  t.sms_help_text AS "smsHelpText",
  to_char(t.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS "createdAt",
  to_char(t.updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS "updatedAt"`

const STATE_COLUMNS = sql.fragment`id, tier, status, salt, default_grace_period, recording_enabled, recording_consent_mode,
  expired_call_behavior, support_phone, recording_consent_audio_url, sms_opt_out_text, sms_help_text`

function toState(r: Record<string, any>): TenantState {
  return {
    id: r.id, tier: r.tier, status: r.status, salt: Buffer.from(r.salt),
    defaultGracePeriod: r.default_grace_period, recordingEnabled: r.recording_enabled, recordingConsentMode: r.recording_consent_mode,
    expiredCallBehavior: r.expired_call_behavior, supportPhone: r.support_phone, recordingConsentAudioUrl: r.recording_consent_audio_url,
    smsOptOutText: r.sms_opt_out_text, smsHelpText: r.sms_help_text,
  }
}

/** Boot and resync of the tenant directory: every tenant. */
export async function loadTenantStates(db: CommonQueryMethods): Promise<TenantState[]> {
  return (await db.any(sql.unsafe`SELECT ${STATE_COLUMNS} FROM tenants`)).map(toState)
}

export async function getTenantState(db: CommonQueryMethods, id: string): Promise<TenantState | null> {
  const r = await db.maybeOne(sql.unsafe`SELECT ${STATE_COLUMNS} FROM tenants WHERE id = ${id}`)
  return r ? toState(r) : null
}

const toCredential = (r: Record<string, any>): ApiCredential =>
  ({ id: r.id, tenantId: r.tenant_id, keyHash: Buffer.from(r.key_hash), secretMac: Buffer.from(r.secret_mac) })

/**
 * What the live credentials are, in one value: their count and a sum of a 64-bit hash of each row
 * (id, tenant, key hash, secret MAC), so a credential added, revoked, deleted or edited in place
 * changes it. The directory's periodic resync reloads the credentials only when it changed: at
 * 130,000 keys the reload was ~0.5 s of this process's CPU every 30 s, in blocks of up to ~70 ms
 * (the bench's read p99), and a new object per key promoted to the old generation each time.
 */
export async function liveCredentialsFingerprint(db: CommonQueryMethods): Promise<string> {
  return await db.oneFirst(sql.unsafe`
    SELECT count(*)::text || ':' || coalesce(sum(hashtextextended(
             id::text || tenant_id::text || encode(key_hash, 'hex') || encode(secret_mac, 'hex'), 0)), 0)::text
    FROM api_credentials WHERE revoked_at IS NULL`) as string
}

/** Boot and resync of the tenant directory: every live credential. */
export async function loadLiveCredentials(db: CommonQueryMethods): Promise<ApiCredential[]> {
  return (await db.any(sql.unsafe`SELECT id, tenant_id, key_hash, secret_mac FROM api_credentials WHERE revoked_at IS NULL`)).map(toCredential)
}

/** The live credentials of one tenant (after a rotation, here or on another node). */
export async function liveCredentialsOf(db: CommonQueryMethods, tenantId: string): Promise<ApiCredential[]> {
  return (await db.any(sql.unsafe`SELECT id, tenant_id, key_hash, secret_mac FROM api_credentials
    WHERE tenant_id = ${tenantId} AND revoked_at IS NULL`)).map(toCredential)
}

/**
 * Suspends or reinstates a tenant (contract D3: a suspended tenant's tokens get 403). The spec
 * names no endpoint for it; this is the operator's (billing, abuse) path, and
 * TenantDirectory.setStatus announces it to every node.
 */
export async function setTenantStatus(db: CommonQueryMethods, id: string, status: TenantStatus): Promise<boolean> {
  const r = await db.query(sql.unsafe`UPDATE tenants SET status = ${status}, updated_at = now() WHERE id = ${id}`)
  return r.rowCount === 1
}

export async function getTenant(db: CommonQueryMethods, id: string): Promise<TenantRow | null> {
  return await db.maybeOne(sql.unsafe`
    SELECT ${TENANT_COLUMNS} FROM tenants t LEFT JOIN webhook_configs wc ON wc.tenant_id = t.id
    WHERE t.id = ${id}`) as TenantRow | null
}

export interface NewTenant {
  tenantId: string
  name: string
  salt: Buffer
  userId: string
  email: string
  passwordHash: string
  credentialId: string
  keyHash: Buffer
  secretMac: Buffer
}

/** Signup (contract 4.1): tenant, OWNER user and first credentials in one transaction. */
export async function createTenantWithOwner(db: DatabasePool, t: NewTenant): Promise<'created' | 'conflict'> {
  try {
    await db.transaction(async tx => {
      await tx.query(sql.unsafe`INSERT INTO tenants (id, name, salt) VALUES (${t.tenantId}, ${t.name}, ${sql.binary(t.salt)})`)
      await tx.query(sql.unsafe`INSERT INTO users (id, tenant_id, email, password_hash, role)
        VALUES (${t.userId}, ${t.tenantId}, ${t.email}, ${t.passwordHash}, 'OWNER')`)
      await tx.query(sql.unsafe`INSERT INTO api_credentials (id, tenant_id, key_hash, secret_mac)
        VALUES (${t.credentialId}, ${t.tenantId}, ${sql.binary(t.keyHash)}, ${sql.binary(t.secretMac)})`)
    })
    return 'created'
  } catch (err) {
    if (toStoreError(err).slug === 'conflict') return 'conflict'
    throw err
  }
}

/** The live (not revoked) credential of an apiKey hash: a directory miss (a key made on another node). */
export async function findCredential(db: CommonQueryMethods, keyHash: Buffer): Promise<ApiCredential | null> {
  const r = await db.maybeOne(sql.unsafe`
    SELECT id, tenant_id, key_hash, secret_mac FROM api_credentials
    WHERE key_hash = ${sql.binary(keyHash)} AND revoked_at IS NULL`)
  return r ? toCredential(r) : null
}

/** Rotation (contract 4.1, 5.5): the old pair is revoked in the same transaction that adds the new one. */
export async function rotateCredentials(db: DatabasePool, tenantId: string, c: { credentialId: string; keyHash: Buffer; secretMac: Buffer }): Promise<void> {
  await db.transaction(async tx => {
    await tx.query(sql.unsafe`UPDATE api_credentials SET revoked_at = now() WHERE tenant_id = ${tenantId} AND revoked_at IS NULL`)
    await tx.query(sql.unsafe`INSERT INTO api_credentials (id, tenant_id, key_hash, secret_mac)
      VALUES (${c.credentialId}, ${tenantId}, ${sql.binary(c.keyHash)}, ${sql.binary(c.secretMac)})`)
  })
}

export interface UserMatch {
  id: string
  email: string
  role: UserRole
  tenantId: string
  passwordHash: string
  tenant: { id: string; name: string; tier: Tier; status: TenantStatus }
}

export async function findUserByEmail(db: CommonQueryMethods, email: string): Promise<UserMatch | null> {
  const r = await db.maybeOne(sql.unsafe`
    SELECT u.id, u.email, u.role, u.tenant_id, u.password_hash, t.name, t.tier, t.status
    FROM users u JOIN tenants t ON t.id = u.tenant_id
    WHERE lower(u.email) = lower(${email})`)
  if (!r) return null
  return {
    id: r.id, email: r.email, role: r.role, tenantId: r.tenant_id, passwordHash: r.password_hash,
    tenant: { id: r.tenant_id, name: r.name, tier: r.tier, status: r.status },
  }
}

export interface TenantPatch {
  name?: string
  webhookUrl?: string | null
  defaultGracePeriod?: number
  expiredCallBehavior?: ExpiredCallBehavior
  supportPhone?: string | null
  recordingEnabled?: boolean
  recordingConsentMode?: ConsentPrompt
  recordingConsentAudioUrl?: string | null
  pushConfig?: Record<string, unknown>
  smsOptOutText?: string | null
  smsHelpText?: string | null
}

const PATCH_COLUMNS: Record<keyof TenantPatch, string> = {
  name: 'name',
  webhookUrl: 'webhook_url',
  defaultGracePeriod: 'default_grace_period',
  expiredCallBehavior: 'expired_call_behavior',
  supportPhone: 'support_phone',
  recordingEnabled: 'recording_enabled',
  recordingConsentMode: 'recording_consent_mode',
  recordingConsentAudioUrl: 'recording_consent_audio_url',
  pushConfig: 'push_config',
  smsOptOutText: 'sms_opt_out_text',
  smsHelpText: 'sms_help_text',
}

/**
 * PATCH /v1/config (contract 4.4): only sent fields change. R-REC is checked on the merged row
 * under a row lock, so two concurrent patches cannot together enable recording without consent.
 */
export async function updateTenant(db: DatabasePool, id: string, patch: TenantPatch): Promise<TenantRow | 'not-found' | 'r-rec' | 'conflict'> {
  try {
    return await db.transaction(async tx => {
      const cur = await tx.maybeOne(sql.unsafe`SELECT recording_enabled, recording_consent_mode FROM tenants WHERE id = ${id} FOR UPDATE`)
      if (!cur) return 'not-found' as const
      const recording = patch.recordingEnabled ?? cur.recording_enabled
      const consent = patch.recordingConsentMode ?? cur.recording_consent_mode
      if (recording && consent === 'NONE') return 'r-rec' as const
      const sets = (Object.keys(PATCH_COLUMNS) as (keyof TenantPatch)[])
        .filter(k => patch[k] !== undefined)
        .map(k => {
          const v = patch[k]
          const value = k === 'pushConfig' ? sql.jsonb(v as never) : (v as string | number | boolean | null)
          return sql.fragment`${sql.identifier([PATCH_COLUMNS[k]])} = ${value}`
        })
      sets.push(sql.fragment`updated_at = now()`)
      await tx.query(sql.unsafe`UPDATE tenants SET ${sql.join(sets, sql.fragment`, `)} WHERE id = ${id}`)
      if (typeof patch.webhookUrl === 'string') {
        await tx.query(sql.unsafe`UPDATE webhook_configs SET url = ${patch.webhookUrl}, updated_at = now() WHERE tenant_id = ${id}`)
      }
      return (await getTenant(tx, id))!
    })
  } catch (err) {
    if (toStoreError(err).slug === 'conflict') return 'conflict'
    throw err
  }
}
