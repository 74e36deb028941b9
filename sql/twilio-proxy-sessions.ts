// The Twilio Proxy façade's store, part two: Sessions, Participants and the interactions the façade
// records (migration 018). A participant's identifier is stored encrypted and hashed only.
import { sql } from 'slonik'
import { guard, StoreError } from './errors.js'
import { keysetPage, type Page, type PageRequest } from './twilio-proxy-page.js'
import { ts, tsOrNull, type Db } from './transaction.js'

export type SessionStatus = 'open' | 'in-progress' | 'closed' | 'failed' | 'unknown'
export type SessionMode = 'message-only' | 'voice-only' | 'voice-and-message'

export interface SessionRow {
  id: string; service_id: string; tenant_id: string; unique_name: string | null; status: SessionStatus; mode: SessionMode
  ttl: number; date_expiry: number | null; expires_at: number | null; date_started: number | null; date_ended: number | null
  date_last_interaction: number | null; closed_reason: string | null; native_session_id: string | null
  created_at: number; updated_at: number
}

export const SESSION_COLUMNS = sql.fragment`id, service_id, tenant_id, unique_name, status, mode, ttl, date_expiry, expires_at, date_started,
  date_ended, date_last_interaction, closed_reason, native_session_id, created_at, updated_at`

export type NewSession = Omit<SessionRow, 'updated_at' | 'native_session_id' | 'date_ended' | 'date_last_interaction' | 'closed_reason'>

export async function getSession(db: Db, serviceId: string, by: { id: string } | { uniqueName: string }): Promise<SessionRow | null> {
  const where = 'id' in by ? sql.fragment`id = ${by.id}` : sql.fragment`unique_name = ${by.uniqueName}`
  return guard(async () => await db.maybeOne(sql.unsafe`SELECT ${SESSION_COLUMNS} FROM twilio_sessions WHERE service_id = ${serviceId} AND ${where}`) as SessionRow | null)
}

export async function listSessions(db: Db, serviceId: string, req: PageRequest): Promise<Page<SessionRow & { key: string }>> {
  return guard(() => keysetPage(db, SESSION_COLUMNS, sql.fragment`FROM twilio_sessions WHERE service_id = ${serviceId}`, sql.fragment`id`, req))
}

export interface SessionPatch {
  ttl?: number; date_expiry?: number | null; expires_at?: number | null; status?: SessionStatus; date_started?: number | null
  date_ended?: number | null; closed_reason?: string | null; native_session_id?: string | null; date_last_interaction?: number
}

const TIMES = new Set(['date_expiry', 'expires_at', 'date_started', 'date_ended', 'date_last_interaction'])

/**
 * Writes the patch; participants follow the status: inactive while closed, active again on a
 * re-open ('pair-taken' then, and nothing changes, when a pair is active in another session).
 */
export async function patchSession(db: Db, id: string, p: SessionPatch, now: number): Promise<SessionRow | 'pair-taken'> {
  const sets = Object.entries(p).filter(([, v]) => v !== undefined).map(([k, v]) =>
    TIMES.has(k) ? sql.fragment`${sql.identifier([k])} = ${tsOrNull(v as number | null)}` : sql.fragment`${sql.identifier([k])} = ${v as string | number | null}`)
  sets.push(sql.fragment`updated_at = ${ts(now)}`)
  try {
    return await guard(() => db.transaction(async tx => {
      const row = await tx.one(sql.unsafe`UPDATE twilio_sessions SET ${sql.join(sets, sql.fragment`, `)} WHERE id = ${id} RETURNING ${SESSION_COLUMNS}`) as SessionRow
      if (p.status !== undefined) {
        const active = p.status === 'open' || p.status === 'in-progress'
        await tx.query(sql.unsafe`UPDATE twilio_participants SET active = ${active} WHERE session_id = ${id} AND date_deleted IS NULL AND active <> ${active}`)
      }
      return row
    }))
  } catch (err) {
    if (err instanceof StoreError && err.constraint === 'twilio_participants_pair') return 'pair-taken'
    throw err
  }
}

export async function deleteSession(db: Db, id: string): Promise<void> {
  await guard(() => db.query(sql.unsafe`DELETE FROM twilio_sessions WHERE id = ${id}`))
}

/** Closes the sessions (of one tenant, or all) whose expiry has passed, their participants with them (one statement); the closed rows. */
export async function closeDueSessions(db: Db, tenantId: string | null, now: number): Promise<SessionRow[]> {
  const tenant = tenantId === null ? sql.fragment`` : sql.fragment`tenant_id = ${tenantId} AND`
  return guard(async () => [...await db.any(sql.unsafe`
    WITH closed AS (
      UPDATE twilio_sessions SET status = 'closed', date_ended = expires_at, updated_at = ${ts(now)},
        closed_reason = CASE WHEN date_expiry IS NOT NULL AND expires_at = date_expiry THEN 'date_expiry' WHEN ttl > 0 THEN 'ttl' ELSE 'max_duration' END
      WHERE ${tenant} status IN ('open','in-progress') AND expires_at IS NOT NULL AND expires_at <= ${ts(now)}
      RETURNING ${SESSION_COLUMNS}),
    parts AS (UPDATE twilio_participants SET active = false WHERE session_id IN (SELECT id FROM closed) AND active)
    SELECT * FROM closed`)] as SessionRow[])
}

export async function openSessionsOfService(db: Db, serviceId: string): Promise<SessionRow[]> {
  return guard(async () => [...await db.any(sql.unsafe`SELECT ${SESSION_COLUMNS} FROM twilio_sessions WHERE service_id = ${serviceId} AND status IN ('open','in-progress')`)] as SessionRow[])
}

// ---------------------------------------------------------------------------------------------
// Participants

export interface ParticipantRow {
  id: string; session_id: string; service_id: string; identifier_enc: Buffer; identifier_hash: string; friendly_name: string | null
  proxy_number: string; active: boolean; date_deleted: number | null; created_at: number; updated_at: number
}

const PARTICIPANT_COLUMNS = sql.fragment`id, session_id, service_id, identifier_enc, identifier_hash, friendly_name, proxy_number, active, date_deleted, created_at, updated_at`

export type NewParticipant = Omit<ParticipantRow, 'date_deleted' | 'updated_at'> & { tenant_id: string }

/** 'pair-taken': the identifier holds this proxy number in another active session (the partial unique index). */
export async function insertParticipant(db: Db, p: NewParticipant): Promise<ParticipantRow | 'pair-taken'> {
  try {
    return await guard(async () => await db.one(sql.unsafe`
      INSERT INTO twilio_participants (id, session_id, service_id, tenant_id, identifier_enc, identifier_hash, friendly_name, proxy_number, active, created_at, updated_at)
      VALUES (${p.id}, ${p.session_id}, ${p.service_id}, ${p.tenant_id}, ${sql.binary(p.identifier_enc)}, ${p.identifier_hash}, ${p.friendly_name},
        ${p.proxy_number}, ${p.active}, ${ts(p.created_at)}, ${ts(p.created_at)})
      RETURNING ${PARTICIPANT_COLUMNS}`) as ParticipantRow)
  } catch (err) {
    if (err instanceof StoreError && err.constraint === 'twilio_participants_pair') return 'pair-taken'
    throw err
  }
}

/** Every participant of the session, deleted ones included, oldest first. */
export async function sessionParticipants(db: Db, sessionId: string): Promise<ParticipantRow[]> {
  return guard(async () => [...await db.any(sql.unsafe`SELECT ${PARTICIPANT_COLUMNS} FROM twilio_participants WHERE session_id = ${sessionId} ORDER BY created_at, id`)] as ParticipantRow[])
}

export async function listParticipants(db: Db, sessionId: string, req: PageRequest): Promise<Page<ParticipantRow & { key: string }>> {
  return guard(() => keysetPage(db, PARTICIPANT_COLUMNS, sql.fragment`FROM twilio_participants WHERE session_id = ${sessionId}`, sql.fragment`id`, req))
}

export async function softDeleteParticipant(db: Db, id: string, now: number): Promise<ParticipantRow | null> {
  return guard(async () => await db.maybeOne(sql.unsafe`
    UPDATE twilio_participants SET active = false, date_deleted = ${ts(now)}, updated_at = ${ts(now)} WHERE id = ${id} AND date_deleted IS NULL
    RETURNING ${PARTICIPANT_COLUMNS}`) as ParticipantRow | null)
}

export async function deleteParticipant(db: Db, id: string): Promise<void> {
  await guard(() => db.query(sql.unsafe`DELETE FROM twilio_participants WHERE id = ${id}`))
}
