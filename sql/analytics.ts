// Analytics reports (contract 4.5), aggregated in Postgres over one tenant's rows in a period
// (start inclusive, end exclusive). Buckets are UTC hours or days and `ts` is the bucket start
// (contract D7); only buckets holding at least one row are returned, so a bucket never divides
// by zero. Sessions are bucketed by createdAt, calls by initiatedAt (as GET /v1/calls filters),
// using the (tenant_id, created_at) and (tenant_id, initiated_at) indexes.
import { sql } from 'slonik'
import { guard } from './errors.js'
import { iso, type Db } from './transaction.js'

export type Granularity = 'hour' | 'day'
export type CallStatus = 'RINGING' | 'ANSWERED' | 'COMPLETED' | 'MISSED' | 'FAILED'
export type CallDirection = 'A_TO_B' | 'B_TO_A'

const STATUS_ORDER: readonly CallStatus[] = ['RINGING', 'ANSWERED', 'COMPLETED', 'MISSED', 'FAILED']
const DIRECTION_ORDER: readonly CallDirection[] = ['A_TO_B', 'B_TO_A']

/** A period: ISO 8601 instants (any offset) or epoch ms. */
export interface PeriodQuery {
  tenantId: string
  from: string | number
  to: string | number
}

function bound(t: string | number) {
  return typeof t === 'number' ? sql.fragment`${iso(t)}::timestamptz` : sql.fragment`${t}::timestamptz`
}

// Literal SQL per granularity (never a parameter: the same expression must appear in GROUP BY).
// `x AT TIME ZONE 'UTC'` is the UTC wall time, truncated, then turned back into an instant, so
// the bucket does not depend on the session's TimeZone setting.
function bucketOf(g: Granularity, column: 'created_at' | 'initiated_at' | 'hour') {
  const col = sql.identifier([column])
  return g === 'hour'
    ? sql.fragment`(date_trunc('hour', ${col} AT TIME ZONE 'UTC') AT TIME ZONE 'UTC')`
    : sql.fragment`(date_trunc('day', ${col} AT TIME ZONE 'UTC') AT TIME ZONE 'UTC')`
}

export interface SessionsBucket { ts: string; count: number; poolExhausted?: number }

/**
 * Sessions created per bucket, oldest first; contract D12: with the creates refused for lack of
 * numbers (pool_refusals, counted per UTC hour, so an hour bucket holds whole hours) as
 * `poolExhausted` on the buckets that had any, a bucket with refusals only included.
 */
export async function sessionsOverTime(db: Db, q: PeriodQuery & { granularity: Granularity }): Promise<SessionsBucket[]> {
  return guard(async () => {
    const rows = (await db.any(sql.unsafe`
      WITH created AS (
        SELECT ${bucketOf(q.granularity, 'created_at')} AS ts, count(*)::int4 AS count
        FROM sessions
        WHERE tenant_id = ${q.tenantId} AND created_at >= ${bound(q.from)} AND created_at < ${bound(q.to)}
        GROUP BY 1
      ), refused AS (
        SELECT ${bucketOf(q.granularity, 'hour')} AS ts, sum(count)::int4 AS refused
        FROM pool_refusals
        WHERE tenant_id = ${q.tenantId} AND hour >= ${bound(q.from)} AND hour < ${bound(q.to)}
        GROUP BY 1
      )
      SELECT COALESCE(c.ts, r.ts) AS ts, COALESCE(c.count, 0) AS count, COALESCE(r.refused, 0) AS refused
      FROM created c FULL JOIN refused r ON r.ts = c.ts
      ORDER BY 1`)) as readonly { ts: number; count: number; refused: number }[]
    return rows.map(r => ({ ts: iso(r.ts), count: r.count, ...(r.refused > 0 ? { poolExhausted: r.refused } : {}) }))
  })
}

export interface CallSuccessBucket {
  ts: string
  total: number
  answered: number
  completed: number
  missed: number
  failed: number
  rate: number
}

/** Calls per bucket by outcome; rate = (answered + completed) / total to 4 places (RINGING counts in total only). */
export async function callSuccessRate(db: Db, q: PeriodQuery & { granularity: Granularity }): Promise<CallSuccessBucket[]> {
  return guard(async () => {
    const rows = (await db.any(sql.unsafe`
      SELECT ts, total, answered, completed, missed, failed,
             round((answered + completed)::numeric / total, 4)::float8 AS rate
      FROM (
        SELECT ${bucketOf(q.granularity, 'initiated_at')} AS ts,
               count(*)::int4 AS total,
               (count(*) FILTER (WHERE status = 'ANSWERED'))::int4 AS answered,
               (count(*) FILTER (WHERE status = 'COMPLETED'))::int4 AS completed,
               (count(*) FILTER (WHERE status = 'MISSED'))::int4 AS missed,
               (count(*) FILTER (WHERE status = 'FAILED'))::int4 AS failed
        FROM call_records
        WHERE tenant_id = ${q.tenantId} AND initiated_at >= ${bound(q.from)} AND initiated_at < ${bound(q.to)}
        GROUP BY 1
      ) b
      ORDER BY ts`)) as readonly (Omit<CallSuccessBucket, 'ts'> & { ts: number })[]
    return rows.map(r => ({ ...r, ts: iso(r.ts) }))
  })
}

export interface CallsSummary {
  total: number
  avgDurationSeconds: number
  byStatus: { status: CallStatus; count: number }[]
  byDirection: { direction: CallDirection; count: number }[]
}

/**
 * Totals of the calls matching the filters, in one scan (grouping sets: per status, per
 * direction, and the grand total). avgDurationSeconds is the mean over those calls (a call not
 * yet ended counts its 0), 2 decimal places. The lists hold only values that occur, in the
 * contract's order, so both are empty when there are no calls.
 */
export async function callsSummary(db: Db, q: PeriodQuery & { status?: CallStatus | undefined; direction?: CallDirection | undefined }): Promise<CallsSummary> {
  return guard(async () => {
    const rows = (await db.any(sql.unsafe`
      SELECT status, direction, GROUPING(status, direction)::int4 AS level, count(*)::int4 AS n,
             COALESCE(round(avg(duration_seconds), 2), 0)::float8 AS avg
      FROM call_records
      WHERE tenant_id = ${q.tenantId} AND initiated_at >= ${bound(q.from)} AND initiated_at < ${bound(q.to)}
        ${q.status ? sql.fragment`AND status = ${q.status}` : sql.fragment``}
        ${q.direction ? sql.fragment`AND direction = ${q.direction}` : sql.fragment``}
      GROUP BY GROUPING SETS ((status), (direction), ())`)) as readonly {
      status: CallStatus | null; direction: CallDirection | null; level: number; n: number; avg: number
    }[]
    // GROUPING(status, direction): 1 = grouped by status, 2 = by direction, 3 = grand total.
    const total = rows.find(r => r.level === 3)
    const byStatus = rows.filter(r => r.level === 1 && r.n > 0)
      .sort((a, b) => STATUS_ORDER.indexOf(a.status!) - STATUS_ORDER.indexOf(b.status!))
      .map(r => ({ status: r.status!, count: r.n }))
    const byDirection = rows.filter(r => r.level === 2 && r.n > 0)
      .sort((a, b) => DIRECTION_ORDER.indexOf(a.direction!) - DIRECTION_ORDER.indexOf(b.direction!))
      .map(r => ({ direction: r.direction!, count: r.n }))
    return { total: total?.n ?? 0, avgDurationSeconds: total?.avg ?? 0, byStatus, byDirection }
  })
}
