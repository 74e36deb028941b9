// Read-only figures of the operator console (README.md, Operator console) that no API endpoint had: one tenant's live
// sessions by state, its calls and SMS per UTC minute over the last hour, and one session's
// timeline. Nothing here reads a number column, nor a party hash.
import { sql } from 'slonik'
import type { CallDirection, CallStatus, SmsStatus } from '../engine/types.js'
import { isUuid } from './cursor.js'
import { guard } from './errors.js'
import { iso, ts, type Db } from './transaction.js'

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

/** The kinds of a session's timeline: its own milestones, its calls and SMS, its target swaps. */
export type TimelineItem =
  | { kind: 'created' | 'activated' | 'swap' | 'ended' | 'expired' | 'failed'; at: string }
  | { kind: 'call'; at: string; id: string; direction: CallDirection; status: CallStatus; durationSeconds: number }
  | { kind: 'sms'; at: string; id: string; direction: CallDirection; status: SmsStatus; reason: string | null }

export interface SessionTimeline {
  /** Oldest first. */
  items: TimelineItem[]
  /** More calls, SMS or swaps than `perKind`: the oldest of that kind are left out. */
  truncated: boolean
}

/** The audit action updateSession writes with a swap (api/app/session-runner.ts): the event's name. */
const SWAP_ACTION = 'session.target_swapped'
/**
 * Session times are the node's clock, audit_log.created_at is Postgres's now(): the swap window is
 * widened by this much on each side so that a node's clock off from the database's by up to this
 * much still finds its swaps (NTP keeps them within milliseconds; the margin costs a few rows).
 */
export const CLOCK_MARGIN_MS = 5 * 60_000

interface SessionRow { state: string; created_at: number; activated_at: number; ended_at: number | null; expired_at: number | null }
interface RecordRow {
  kind: 'call' | 'sms' | 'swap'; at: number; id: string
  direction: CallDirection | null; status: string | null; duration_seconds: number | null; reason: string | null
}

/**
 * A session's timeline (the console's session page): null unless the tenant has the session.
 * Built from the tables indexed for it, never from the outbox (write-hot, and no index serves a
 * read by session there, and none is added for this):
 * - the session row (primary key): created, activated, ended, expired or failed;
 * - its calls, newest `perKind` (call_records_session) and SMS (sms_records_session_sent), with
 *   direction, status, duration or reason; never party_b_hash nor any number;
 * - its target swaps: the audit_log rows updateSession writes with them (the only durable record
 *   of a swap besides the outbox), by audit_log_tenant over the session's lifetime, which bounds
 *   the range to the tenant's swaps while this session lived. The hashes in them are not read.
 */
export async function sessionTimeline(db: Db, tenantId: string, sessionId: string, perKind: number): Promise<SessionTimeline | null> {
  if (!isUuid(sessionId) || !isUuid(tenantId)) return null
  return guard(async () => {
    const s = (await db.maybeOne(sql.unsafe`
      SELECT state, created_at, activated_at, ended_at, expired_at FROM sessions
      WHERE id = ${sessionId} AND tenant_id = ${tenantId}`)) as SessionRow | null
    if (!s) return null
    // A swap happens while the session is live: from its creation to its expiry (still open while
    // it is live, so the range runs to the index's end).
    const swapsTo = s.expired_at === null ? sql.fragment`` : sql.fragment`AND created_at <= ${ts(s.expired_at + CLOCK_MARGIN_MS)}`
    const rows = (await db.any(sql.unsafe`
      (SELECT 'call' AS kind, initiated_at AS at, id, direction, status, duration_seconds, NULL::text AS reason
        FROM call_records WHERE session_id = ${sessionId} AND tenant_id = ${tenantId}
        ORDER BY id DESC LIMIT ${perKind + 1})
      UNION ALL
      (SELECT 'sms', sent_at, id, direction, status, NULL::int4, reason
        FROM sms_records WHERE session_id = ${sessionId} AND tenant_id = ${tenantId}
        ORDER BY sent_at DESC, id DESC LIMIT ${perKind + 1})
      UNION ALL
      (SELECT 'swap', created_at, id, NULL::text, NULL::text, NULL::int4, NULL::text
        FROM audit_log WHERE tenant_id = ${tenantId} AND created_at >= ${ts(s.created_at - CLOCK_MARGIN_MS)} ${swapsTo}
          AND action = ${SWAP_ACTION} AND target_id = ${sessionId}
        ORDER BY created_at DESC LIMIT ${perKind + 1})`)) as readonly RecordRow[]

    const counts = { call: 0, sms: 0, swap: 0 }
    let truncated = false
    const timed: Array<{ ms: number; item: TimelineItem }> = [{ ms: s.created_at, item: { kind: 'created', at: iso(s.created_at) } }]
    if (s.state !== 'PENDING') timed.push({ ms: s.activated_at, item: { kind: 'activated', at: iso(s.activated_at) } })
    for (const r of rows) {
      // Each kind comes newest first: past `perKind`, the rest of that kind is older.
      if (++counts[r.kind] > perKind) { truncated = true; continue }
      // A swap is stamped by Postgres's clock: kept within the session's life as its node saw it.
      const ms = r.kind === 'swap' ? Math.min(Math.max(r.at, s.created_at), s.expired_at ?? Infinity) : r.at
      const at = iso(ms)
      timed.push({
        ms,
        item: r.kind === 'call'
          ? { kind: 'call', at, id: r.id, direction: r.direction!, status: r.status as CallStatus, durationSeconds: r.duration_seconds ?? 0 }
          : r.kind === 'sms'
            ? { kind: 'sms', at, id: r.id, direction: r.direction!, status: r.status as SmsStatus, reason: r.reason }
            : { kind: 'swap', at },
      })
    }
    if (s.ended_at !== null) timed.push({ ms: s.ended_at, item: { kind: 'ended', at: iso(s.ended_at) } })
    if (s.expired_at !== null) timed.push({ ms: s.expired_at, item: { kind: s.state === 'FAILED' ? 'failed' : 'expired', at: iso(s.expired_at) } })
    // Stable: at one instant, the order above (created, activated, records, ended, expiry).
    timed.sort((a, b) => a.ms - b.ms)
    return { items: timed.map(t => t.item), truncated }
  })
}
