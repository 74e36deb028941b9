// Call and SMS records (contract 2.3, 2.4): the write-behind writer (sql/record-writer.ts) and the
// reads behind GET /v1/calls, /v1/calls/:id, /v1/sessions/:id/calls and /v1/sessions/:id/sms.
// Views carry ISO 8601 times; SMS records have no text column to read (contract 1.6).
import { sql } from 'slonik'
import type { CallDirection, CallStatus, SmsStatus } from '../engine/types.js'
import { decodeTimeCursor, encodeTimeCursor, isUuid } from './cursor.js'
import { guard } from './errors.js'
import { iso, isoOrNull, ts, type Db } from './transaction.js'

export { CALL_START, createRecordWriter, type CallCallback, type CallInsert, type CallKey, type Effects, type RecordWriter, type SmsClaim, type SmsInsert } from './record-writer.js'

export interface CallView {
  id: string
  sessionId: string
  status: CallStatus
  direction: CallDirection
  durationSeconds: number
  initiatedAt: string
  answeredAt: string | null
  endedAt: string | null
  recordingUrl: string | null
}

export interface CallWithConsentView extends CallView {
  recordingConsentPlayed: boolean
}

interface CallRow {
  id: string; session_id: string; tenant_id: string; provider_call_id: string; status: CallStatus; direction: CallDirection
  duration_seconds: number; initiated_at: number; answered_at: number | null; ended_at: number | null
  recording_url: string | null; recording_duration_seconds: number | null; recording_consent_played: boolean; party_b_hash: string
}

const CALL_COLUMNS = sql.fragment`
  id, session_id, tenant_id, provider_call_id, status, direction, duration_seconds, initiated_at, answered_at, ended_at,
  recording_url, recording_duration_seconds, recording_consent_played, party_b_hash`

function callView(r: CallRow): CallView {
  return {
    id: r.id,
    sessionId: r.session_id,
    status: r.status,
    direction: r.direction,
    durationSeconds: r.duration_seconds,
    initiatedAt: iso(r.initiated_at),
    answeredAt: isoOrNull(r.answered_at),
    endedAt: isoOrNull(r.ended_at),
    recordingUrl: r.recording_url,
  }
}

export type Page<T> = 'bad-cursor' | { data: T[]; after: string | null }

/** GET /v1/sessions/:id/calls: by id (chronological, UUIDv7), `after` = id of the last row. */
export async function listSessionCalls(db: Db, q: { sessionId: string; limit: number; after?: string | undefined }): Promise<Page<CallWithConsentView>> {
  if (q.after !== undefined && !isUuid(q.after)) return 'bad-cursor'
  if (!isUuid(q.sessionId)) return { data: [], after: null }
  return guard(async () => {
    const rows = (await db.any(sql.unsafe`
      SELECT ${CALL_COLUMNS} FROM call_records
      WHERE session_id = ${q.sessionId} ${q.after ? sql.fragment`AND id > ${q.after}` : sql.fragment``}
      ORDER BY id LIMIT ${q.limit + 1}`)) as readonly CallRow[]
    const page = rows.slice(0, q.limit).map(r => ({ ...callView(r), recordingConsentPlayed: r.recording_consent_played }))
    return { data: page, after: rows.length > q.limit ? page[page.length - 1]!.id : null }
  })
}

export interface ListCallsQuery {
  tenantId: string
  status?: CallStatus | string | undefined
  direction?: CallDirection | string | undefined
  /** Inclusive lower bound on initiatedAt: ISO 8601 or epoch ms. */
  periodStart?: string | number | undefined
  /** Exclusive upper bound on initiatedAt. */
  periodEnd?: string | number | undefined
  sessionId?: string | undefined
  limit: number
  after?: string | undefined
}

/** GET /v1/calls: the tenant's calls by id (chronological), `after` = id of the last row. */
export async function listCalls(db: Db, q: ListCallsQuery): Promise<Page<CallView>> {
  if (q.after !== undefined && !isUuid(q.after)) return 'bad-cursor'
  if (q.sessionId !== undefined && !isUuid(q.sessionId)) return { data: [], after: null }
  const bound = (t: string | number) => (typeof t === 'number' ? ts(t) : sql.fragment`${t}::timestamptz`)
  return guard(async () => {
    const rows = (await db.any(sql.unsafe`
      SELECT ${CALL_COLUMNS} FROM call_records
      WHERE tenant_id = ${q.tenantId}
        ${q.status ? sql.fragment`AND status = ${q.status}` : sql.fragment``}
        ${q.direction ? sql.fragment`AND direction = ${q.direction}` : sql.fragment``}
        ${q.periodStart !== undefined ? sql.fragment`AND initiated_at >= ${bound(q.periodStart)}` : sql.fragment``}
        ${q.periodEnd !== undefined ? sql.fragment`AND initiated_at < ${bound(q.periodEnd)}` : sql.fragment``}
        ${q.sessionId ? sql.fragment`AND session_id = ${q.sessionId}` : sql.fragment``}
        ${q.after ? sql.fragment`AND id > ${q.after}` : sql.fragment``}
      ORDER BY id LIMIT ${q.limit + 1}`)) as readonly CallRow[]
    const page = rows.slice(0, q.limit).map(callView)
    return { data: page, after: rows.length > q.limit ? page[page.length - 1]!.id : null }
  })
}

/** GET /v1/calls/:id: only a call of the tenant's sessions. */
export async function getCall(db: Db, tenantId: string, id: string): Promise<CallView | null> {
  if (!isUuid(id)) return null
  return guard(async () => {
    const row = (await db.maybeOne(sql.unsafe`SELECT ${CALL_COLUMNS} FROM call_records WHERE id = ${id} AND tenant_id = ${tenantId}`)) as CallRow | null
    return row && callView(row)
  })
}

/** The stored call, for the provider callbacks (times in epoch ms). */
export interface CallRecord {
  id: string
  sessionId: string
  tenantId: string
  providerCallId: string
  status: CallStatus
  direction: CallDirection
  durationSeconds: number
  initiatedAt: number
  answeredAt: number | null
  endedAt: number | null
  recordingUrl: string | null
  recordingDurationSeconds: number | null
  recordingConsentPlayed: boolean
  partyBHash: string
}

/** Reads what is committed: flush the RecordWriter first to see its queued writes. */
export async function getCallRecord(db: Db, key: { callId: string } | { providerCallId: string }): Promise<CallRecord | null> {
  if ('callId' in key && !isUuid(key.callId)) return null
  return guard(async () => {
    const row = (await db.maybeOne(sql.unsafe`
      SELECT ${CALL_COLUMNS} FROM call_records
      WHERE ${'callId' in key ? sql.fragment`id = ${key.callId}` : sql.fragment`provider_call_id = ${key.providerCallId}`}`)) as CallRow | null
    return row && {
      id: row.id, sessionId: row.session_id, tenantId: row.tenant_id, providerCallId: row.provider_call_id, status: row.status,
      direction: row.direction, durationSeconds: row.duration_seconds, initiatedAt: row.initiated_at, answeredAt: row.answered_at,
      endedAt: row.ended_at, recordingUrl: row.recording_url, recordingDurationSeconds: row.recording_duration_seconds,
      recordingConsentPlayed: row.recording_consent_played, partyBHash: row.party_b_hash,
    }
  })
}

export interface SmsView {
  id: string
  sessionId: string
  direction: CallDirection
  status: SmsStatus
  sentAt: string
  deliveredAt: string | null
  /** contract D11: why a FAILED message was dropped before the provider (opted_out, channel); else null. */
  reason: string | null
}

/**
 * GET /v1/sessions/:id/sms: newest first. `after` is the cursor this returned
 * (`<sentAt>_<id>`) or a bare sentAt timestamp (rows sent strictly before it).
 */
export async function listSessionSms(db: Db, q: { sessionId: string; limit: number; after?: string | undefined }): Promise<Page<SmsView>> {
  const cursor = q.after === undefined ? null : decodeTimeCursor(q.after)
  if (q.after !== undefined && !cursor) return 'bad-cursor'
  if (!isUuid(q.sessionId)) return { data: [], after: null }
  return guard(async () => {
    const rows = (await db.any(sql.unsafe`
      SELECT id, session_id, direction, status, sent_at, delivered_at, reason FROM sms_records
      WHERE session_id = ${q.sessionId}
        ${cursor ? (cursor.id ? sql.fragment`AND (sent_at, id) < (${ts(cursor.ms)}, ${cursor.id}::uuid)` : sql.fragment`AND sent_at < ${ts(cursor.ms)}`) : sql.fragment``}
      ORDER BY sent_at DESC, id DESC LIMIT ${q.limit + 1}`)) as readonly {
      id: string; session_id: string; direction: CallDirection; status: SmsStatus; sent_at: number; delivered_at: number | null; reason: string | null
    }[]
    const page = rows.slice(0, q.limit)
    const last = page[page.length - 1]
    return {
      data: page.map(r => ({ id: r.id, sessionId: r.session_id, direction: r.direction, status: r.status, sentAt: iso(r.sent_at), deliveredAt: isoOrNull(r.delivered_at), reason: r.reason })),
      after: rows.length > q.limit && last ? encodeTimeCursor(last.sent_at, last.id) : null,
    }
  })
}
