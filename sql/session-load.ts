// Reading sessions back with their real numbers, for the engine's memory: at boot (every live
// session) and for one session whose record is not in memory. Numbers are decrypted here and go
// nowhere but the engine.
import { sql } from 'slonik'
import type { E164, SessionId, SessionRecord, TenantId, TenantRouting } from '../engine/types.js'
import { isUuid } from './cursor.js'
import { guard } from './errors.js'
import type { Db } from './transaction.js'

export interface SessionCipher {
  decrypt(buf: Buffer): string
}

const RECORD_COLUMNS = sql.fragment`
  id, tenant_id, proxy_number, state, direction_mode, grace_period_minutes, max_duration_minutes, recording_enabled,
  consent_prompt, agent_phone_enc, customer_phone_enc, created_at, activated_at, expires_at, ended_at, expired_at, version`

interface RecordRow {
  id: string; tenant_id: string; proxy_number: string; state: SessionRecord['state']; direction_mode: SessionRecord['directionMode']
  grace_period_minutes: number; max_duration_minutes: number; recording_enabled: boolean; consent_prompt: SessionRecord['consentPrompt']
  agent_phone_enc: Buffer; customer_phone_enc: Buffer; created_at: number; activated_at: number; expires_at: number
  ended_at: number | null; expired_at: number | null; version: number
}

function toRecord(r: RecordRow, cipher: SessionCipher): SessionRecord {
  return {
    id: r.id as SessionId,
    tenantId: r.tenant_id as TenantId,
    proxyNumber: r.proxy_number as E164,
    state: r.state,
    directionMode: r.direction_mode,
    gracePeriodMinutes: r.grace_period_minutes,
    maxDurationMinutes: r.max_duration_minutes,
    recordingEnabled: r.recording_enabled,
    consentPrompt: r.consent_prompt,
    agentPhone: cipher.decrypt(r.agent_phone_enc) as E164,
    customerPhone: cipher.decrypt(r.customer_phone_enc) as E164,
    createdAt: r.created_at,
    activatedAt: r.activated_at,
    expiresAt: r.expires_at,
    endedAt: r.ended_at,
    expiredAt: r.expired_at,
    version: r.version,
  }
}

/** The full record of one session (any state), numbers decrypted; null when unknown. */
export async function getSessionRecord(db: Db, id: string, cipher: SessionCipher): Promise<SessionRecord | null> {
  if (!isUuid(id)) return null
  return guard(async () => {
    const row = (await db.maybeOne(sql.unsafe`SELECT ${RECORD_COLUMNS} FROM sessions WHERE id = ${id}`)) as RecordRow | null
    return row && toRecord(row, cipher)
  })
}

/**
 * Boot: streams every PENDING/ACTIVE/GRACE_PERIOD session, numbers decrypted, in batches
 * keyset-paginated by id (each row exactly once, constant memory). Returns the count.
 */
export async function loadLiveSessions(
  db: Db, cipher: SessionCipher, onBatch: (recs: SessionRecord[]) => void | Promise<void>, batchSize = 10_000,
): Promise<number> {
  let after: string | null = null
  let total = 0
  for (;;) {
    const rows = await guard(async () => (await db.any(sql.unsafe`
      SELECT ${RECORD_COLUMNS} FROM sessions
      WHERE state IN ('PENDING','ACTIVE','GRACE_PERIOD') ${after ? sql.fragment`AND id > ${after}` : sql.fragment``}
      ORDER BY id
      LIMIT ${batchSize}`)) as readonly RecordRow[])
    if (rows.length === 0) return total
    await onBatch(rows.map(r => toRecord(r, cipher)))
    total += rows.length
    after = rows[rows.length - 1]!.id
    if (rows.length < batchSize) return total
  }
}

/** What the engine needs of every tenant to route. */
export async function loadTenantsRouting(db: Db): Promise<TenantRouting[]> {
  return guard(async () => {
    const rows = (await db.any(sql.unsafe`
      SELECT id, tier, expired_call_behavior, support_phone, recording_consent_audio_url FROM tenants ORDER BY id`)) as readonly {
      id: string; tier: TenantRouting['tier']; expired_call_behavior: TenantRouting['expiredCallBehavior']
      support_phone: string | null; recording_consent_audio_url: string | null
    }[]
    return rows.map(r => ({
      id: r.id as TenantId,
      tier: r.tier,
      expiredCallBehavior: r.expired_call_behavior,
      supportPhone: r.support_phone as E164 | null,
      recordingConsentAudioUrl: r.recording_consent_audio_url,
    }))
  })
}
