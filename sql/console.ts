// Read-only figures of the operator console (issue 15) that no API endpoint had: one tenant's live
// sessions by state, its calls and SMS per UTC minute over the last hour, and one session's events
// from the outbox (the only place a target swap is kept). Nothing here reads a number column: the
// outbox envelopes never carry a party number (DECISIONS 6).
import { sql } from 'slonik'
import type { EventEnvelope } from '../api/vocabulary/event-envelope.js'
import { guard } from './errors.js'
import { ts, type Db } from './transaction.js'

export const LIVE_STATES = ['PENDING', 'ACTIVE', 'GRACE_PERIOD'] as const
export type LiveState = (typeof LIVE_STATES)[number]

/** Live sessions of a tenant per state, every live state present (0 when none). */
export async function liveSessionsByState(db: Db, tenantId: string): Promise<Record<LiveState, number>> {
  return guard(async () => {
    // (tenant_id, state, created_at) index: one range per state
    const rows = (await db.any(sql.unsafe`
      SELECT state, count(*)::int4 AS n FROM sessions
      WHERE tenant_id = ${tenantId} AND state IN ('PENDING', 'ACTIVE', 'GRACE_PERIOD')
      GROUP BY state`)) as readonly { state: LiveState; n: number }[]
    const out: Record<LiveState, number> = { PENDING: 0, ACTIVE: 0, GRACE_PERIOD: 0 }
    for (const r of rows) out[r.state] = r.n
    return out
  })
}

export interface MinuteCount { minute: number; calls: number; sms: number }

/**
 * Calls (by initiatedAt) and SMS (by sentAt) per UTC minute from `fromMs` (a minute start) on,
 * oldest first, only minutes with at least one; `minute` is the minute's start in epoch ms.
 */
export async function activityPerMinute(db: Db, tenantId: string, fromMs: number): Promise<MinuteCount[]> {
  return guard(async () => {
    const rows = (await db.any(sql.unsafe`
      SELECT m, sum(calls)::int4 AS calls, sum(sms)::int4 AS sms FROM (
        SELECT (floor(extract(epoch FROM initiated_at) / 60) * 60000)::float8 AS m, 1 AS calls, 0 AS sms
        FROM call_records WHERE tenant_id = ${tenantId} AND initiated_at >= ${ts(fromMs)}
        UNION ALL
        SELECT (floor(extract(epoch FROM sent_at) / 60) * 60000)::float8 AS m, 0 AS calls, 1 AS sms
        FROM sms_records WHERE tenant_id = ${tenantId} AND sent_at >= ${ts(fromMs)}
      ) a GROUP BY m ORDER BY m`)) as readonly { m: number; calls: number; sms: number }[]
    return rows.map(r => ({ minute: r.m, calls: r.calls, sms: r.sms }))
  })
}

/**
 * A session's events, oldest first (ids are UUIDv7), at most `limit`. Tenant-scoped. Call and SMS
 * events are written without the outbox's session_id column, so this matches the envelope's
 * sessionId; outbox has no index for it (TODO #15: an expression index, in a migration of its own).
 */
export async function sessionEvents(db: Db, tenantId: string, sessionId: string, limit: number): Promise<EventEnvelope[]> {
  return guard(async () => {
    const rows = await db.anyFirst(sql.unsafe`
      SELECT envelope FROM outbox WHERE tenant_id = ${tenantId} AND envelope->'data'->>'sessionId' = ${sessionId}
      ORDER BY id LIMIT ${limit}`)
    return rows as unknown as EventEnvelope[]
  })
}
