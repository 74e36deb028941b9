// Sessions as the API returns them (contract 2.2): one by id and the tenant's list, from Postgres
// (what memory does not hold: ended sessions, lists).
import { sql } from 'slonik'
import { type SessionRecord, type SessionState } from '../engine/types.js'
import { callsJoin } from './call-count.js'
import { decodeTimeCursor, encodeTimeCursor, isUuid } from './cursor.js'
import { guard } from './errors.js'
import { iso, isoOrNull, ts, type Db } from './transaction.js'

/** Contract 2.2, as the API returns it: no phone numbers, ISO 8601 times. */
export interface SessionView {
  id: string
  tenantId: string
  proxyNumber: string
  state: SessionState
  directionMode: SessionRecord['directionMode']
  metadata: Record<string, unknown>
  gracePeriodMinutes: number
  maxDurationMinutes: number
  recordingEnabled: boolean
  consentPrompt: SessionRecord['consentPrompt']
  expiresAt: string
  createdAt: string
  activatedAt: string
  endedAt: string | null
  expiredAt: string | null
  callCount: number
  lastCallAt: string | null
  /** contract D10. */
  channels: Array<'voice' | 'sms'>
  inactivityTimeoutMinutes: number | null
}

const VIEW_COLUMNS = sql.fragment`
  id, tenant_id, proxy_number, state, direction_mode, metadata, grace_period_minutes, max_duration_minutes,
  recording_enabled, consent_prompt, expires_at, created_at, activated_at, ended_at, expired_at, calls.call_count, calls.last_call_at,
  channels, inactivity_timeout_minutes`

interface ViewRow {
  id: string; tenant_id: string; proxy_number: string; state: SessionState; direction_mode: SessionView['directionMode']
  metadata: Record<string, unknown>; grace_period_minutes: number; max_duration_minutes: number; recording_enabled: boolean
  consent_prompt: SessionView['consentPrompt']; expires_at: number; created_at: number; activated_at: number
  ended_at: number | null; expired_at: number | null; call_count: number; last_call_at: number | null
  channels: number; inactivity_timeout_minutes: number | null
}

function toView(r: ViewRow): SessionView {
  return {
    id: r.id,
    tenantId: r.tenant_id,
    proxyNumber: r.proxy_number,
    state: r.state,
    directionMode: r.direction_mode,
    metadata: r.metadata,
    gracePeriodMinutes: r.grace_period_minutes,
    maxDurationMinutes: r.max_duration_minutes,
    recordingEnabled: r.recording_enabled,
    consentPrompt: r.consent_prompt,
    expiresAt: iso(r.expires_at),
    createdAt: iso(r.created_at),
    activatedAt: iso(r.activated_at),
    endedAt: isoOrNull(r.ended_at),
    expiredAt: isoOrNull(r.expired_at),
    callCount: r.call_count,
    lastCallAt: isoOrNull(r.last_call_at),
    channels: channelNames(r.channels),
    inactivityTimeoutMinutes: r.inactivity_timeout_minutes,
  }
}

const VOICE_ONLY: Array<'voice' | 'sms'> = ['voice']
const SMS_ONLY: Array<'voice' | 'sms'> = ['sms']
const BOTH: Array<'voice' | 'sms'> = ['voice', 'sms']

/** contract D10: channel bits (engine/types.ts Channel) as the API names them; absent: both. */
export function channelNames(bits: number | undefined): Array<'voice' | 'sms'> {
  return bits === 1 ? [...VOICE_ONLY] : bits === 2 ? [...SMS_ONLY] : [...BOTH]
}

export async function getSession(db: Db, tenantId: string, id: string): Promise<SessionView | null> {
  if (!isUuid(id) || !isUuid(tenantId)) return null
  return guard(async () => {
    const row = (await db.maybeOne(sql.unsafe`SELECT ${VIEW_COLUMNS} FROM sessions ${callsJoin()} WHERE id = ${id} AND tenant_id = ${tenantId}`)) as ViewRow | null
    return row && toView(row)
  })
}

/**
 * GET /v1/sessions: newest first. `after` is the opaque cursor this returned (`<createdAt>_<id>`),
 * or a bare ISO timestamp (sessions created strictly before it).
 */
export async function listSessions(db: Db, q: { tenantId: string; state?: SessionState | string | undefined; limit: number; after?: string | undefined }): Promise<'bad-cursor' | { data: SessionView[]; after: string | null }> {
  const cursor = q.after === undefined ? null : decodeTimeCursor(q.after)
  if (q.after !== undefined && !cursor) return 'bad-cursor'
  return guard(async () => {
    const rows = (await db.any(sql.unsafe`
      SELECT ${VIEW_COLUMNS} FROM sessions ${callsJoin()}
      WHERE tenant_id = ${q.tenantId}
        ${q.state ? sql.fragment`AND state = ${q.state}` : sql.fragment``}
        ${cursor ? (cursor.id ? sql.fragment`AND (created_at, id) < (${ts(cursor.ms)}, ${cursor.id}::uuid)` : sql.fragment`AND created_at < ${ts(cursor.ms)}`) : sql.fragment``}
      ORDER BY created_at DESC, id DESC
      LIMIT ${q.limit + 1}`)) as readonly ViewRow[]
    const page = rows.slice(0, q.limit)
    const last = page[page.length - 1]
    return { data: page.map(toView), after: rows.length > q.limit && last ? encodeTimeCursor(last.created_at, last.id) : null }
  })
}
