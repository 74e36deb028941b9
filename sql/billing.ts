// Usage metering and billing periods (contract 2.5-2.7, 4.6; contract D7). A billing period is a
// calendar month (UTC), opened on first use, one ACTIVE per tenant. A billing event records the
// unit price in force for the tenant's tier when it happened. Replays never bill twice: callers
// give a dedupe key (e.g. `call_minute:<callId>`) to anything that can be reported again.
import { sql, type SerializableValue } from 'slonik'
import type { Queries } from './direct.js'
import { uuidv7 } from './vocabulary/ids.js'
import { isUuid } from './cursor.js'
import { guard } from './errors.js'
import { iso, isoOrNull, jsonb, transact, ts, type Db } from './transaction.js'

const METRICS = ['session_created', 'call_minute', 'sms_sent', 'sms_received', 'recording_minute', 'number_rental'] as const
export type Metric = (typeof METRICS)[number]

export function monthStart(at: number): number {
  const d = new Date(at)
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1)
}

function nextMonthStart(at: number): number {
  const d = new Date(at)
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1)
}

/** The id of the tenant's period containing `at`, opening it (and closing the previous) if new. */
export async function ensurePeriod(tx: Queries, tenantId: string, at: number): Promise<string> {
  const find = sql.unsafe`SELECT id FROM billing_periods WHERE tenant_id = ${tenantId} AND period_start = ${ts(monthStart(at))}`
  const found = (await tx.maybeOneFirst(find)) as string | null
  if (found) return found
  await openPeriods(tx, [{ tenantId, at }])
  return (await tx.oneFirst(find)) as string
}

/**
 * Opens the periods containing each `(tenantId, at)` that do not exist yet, in two statements
 * however many tenants there are: at the turn of a month every tenant's first usage lands in the
 * record writer's next batches, and a few round trips per tenant, in the batch's transaction,
 * held every call and SMS record (and each SMS answer waiting for its claim) behind them.
 * A new month: the ACTIVE period of an earlier month closes. A period of an earlier month that is
 * needed late (a call that ended at 23:59:59 on the last day, reported after midnight) is opened
 * CLOSED, so there is still one ACTIVE period; so is the earlier of two months asked for at once.
 * Concurrent openers meet in the unique indexes: ON CONFLICT DO NOTHING keeps the winner's row.
 * New rows go in tenant order; a deadlock between two nodes' writers opening the same tenants'
 * periods is retried with the whole batch, like any other (sql/errors.ts, 40P01).
 */
export async function openPeriods(tx: Queries, keys: ReadonlyArray<{ tenantId: string; at: number }>): Promise<void> {
  const wanted = new Map<string, { tenantId: string; start: number; at: number }>()
  for (const k of keys) {
    const start = monthStart(k.at)
    wanted.set(`${k.tenantId}|${start}`, { tenantId: k.tenantId, start, at: k.at })
  }
  if (wanted.size === 0) return
  const list = [...wanted.values()].sort((a, b) => (a.tenantId < b.tenantId ? -1 : a.tenantId > b.tenantId ? 1 : a.start - b.start))
  const tenants = sql.array(list.map(p => p.tenantId), 'uuid')
  const starts = sql.array(list.map(p => iso(p.start)), 'timestamptz')
  await tx.query(sql.unsafe`
    UPDATE billing_periods bp SET status = 'CLOSED', closed_at = now()
    FROM (SELECT t, max(s) AS s FROM unnest(${tenants}, ${starts}) AS k(t, s) GROUP BY t) k
    WHERE bp.tenant_id = k.t AND bp.status = 'ACTIVE' AND bp.period_start < k.s`)
  await tx.query(sql.unsafe`
    INSERT INTO billing_periods (id, tenant_id, period_start, period_end, status, created_at, closed_at)
    SELECT k.id, k.t, k.s, k.e, x.status, now(), CASE WHEN x.status = 'CLOSED' THEN now() END
    FROM (SELECT u.*, max(u.s) OVER (PARTITION BY u.t) AS latest
          FROM unnest(${sql.array(list.map(() => uuidv7()), 'uuid')}, ${tenants}, ${starts},
                      ${sql.array(list.map(p => iso(nextMonthStart(p.at))), 'timestamptz')}) WITH ORDINALITY AS u(id, t, s, e, n)) k
    CROSS JOIN LATERAL (
      SELECT CASE WHEN k.s < k.latest OR EXISTS (SELECT 1 FROM billing_periods b WHERE b.tenant_id = k.t AND b.period_start > k.s)
                  THEN 'CLOSED' ELSE 'ACTIVE' END AS status) x
    ORDER BY k.n
    ON CONFLICT DO NOTHING`)
}

export interface UsageInput {
  tenantId: string
  metric: Metric
  /** Decimal string or number (at most 3 decimals). */
  quantity: number | string
  at: number
  sessionId?: string | null
  callRecordId?: string | null
  /** A second event with the same key is ignored. */
  dedupeKey?: string | null
  metadata?: Record<string, unknown>
  /** The unit price in force, when the caller already knows it; looked up from pricing otherwise. */
  unitPrice?: string | null
}

/** Rows for usageCtes(): one per event, each with its own id and the month it falls in. */
export function usageRows(list: readonly UsageInput[]): SerializableValue {
  return list.map(u => ({
    id: uuidv7(),
    tenant_id: u.tenantId,
    period_start: iso(monthStart(u.at)),
    metric: u.metric,
    quantity: String(u.quantity),
    known_price: u.unitPrice !== undefined,
    unit_price: u.unitPrice ?? null,
    recorded_at: iso(u.at),
    session_id: u.sessionId ?? null,
    call_record_id: u.callRecordId ?? null,
    metadata: (u.metadata ?? {}) as SerializableValue,
    dedupe_key: u.dedupeKey ?? null,
  }))
}

/**
 * Two CTEs for a `WITH` list: `usage_rows` (the events with their tenant's period, when it exists)
 * and `usage_ins` (the insert of those that have one). Callers select usageOutcome from them, so
 * usage rides in the statement of the change that causes it: one round trip in the common case,
 * where the month's period is already open. Rows whose period is missing come back by id for
 * finishUsage() (the first event of a tenant in a month).
 */
export function usageCtes(rows: SerializableValue) {
  return sql.fragment`
    usage_rows AS (
      SELECT r.*, bp.id AS billing_period_id
      FROM jsonb_to_recordset(${jsonb(rows)}) AS r(
        id uuid, tenant_id uuid, period_start timestamptz, metric text, quantity numeric, known_price boolean,
        unit_price numeric, recorded_at timestamptz, session_id uuid, call_record_id uuid, metadata jsonb, dedupe_key text)
      LEFT JOIN billing_periods bp ON bp.tenant_id = r.tenant_id AND bp.period_start = r.period_start),
    usage_ins AS (
      INSERT INTO billing_events (id, tenant_id, billing_period_id, metric, quantity, unit_price, recorded_at,
                                  session_id, call_record_id, metadata, dedupe_key)
      SELECT r.id, r.tenant_id, r.billing_period_id, r.metric, r.quantity,
             CASE WHEN r.known_price THEN r.unit_price ELSE (
               SELECT p.unit_price FROM pricing p JOIN tenants t ON t.tier = p.tier
               WHERE t.id = r.tenant_id AND p.metric = r.metric AND p.effective_from <= r.recorded_at
                 AND (p.effective_until IS NULL OR p.effective_until > r.recorded_at)
               ORDER BY p.effective_from DESC LIMIT 1) END,
             r.recorded_at, r.session_id, r.call_record_id, r.metadata, r.dedupe_key
      FROM usage_rows r WHERE r.billing_period_id IS NOT NULL
      ON CONFLICT (dedupe_key) DO NOTHING
      RETURNING id)`
}

/** Select-list items over usageCtes(): `usage_inserted` (count) and `usage_missing` (ids without a period). */
export const usageOutcome = sql.fragment`
  (SELECT count(*) FROM usage_ins)::int AS usage_inserted,
  (SELECT coalesce(jsonb_agg(r.id), '[]'::jsonb) FROM usage_rows r WHERE r.billing_period_id IS NULL) AS usage_missing`

export interface UsageOutcome { usage_inserted: number; usage_missing: string[] }

/** Opens the periods usageCtes() found missing and inserts those rows; returns all new rows. */
export async function finishUsage(tx: Queries, list: readonly UsageInput[], rows: SerializableValue, outcome: UsageOutcome): Promise<number> {
  if (outcome.usage_missing.length === 0) return outcome.usage_inserted
  const missing = new Set(outcome.usage_missing)
  const all = rows as readonly { id: string }[]
  await openPeriods(tx, list.filter((_, i) => missing.has(all[i]!.id)))
  const again = all.filter(r => missing.has(r.id)) as unknown as SerializableValue
  const second = (await tx.one(sql.unsafe`WITH ${usageCtes(again)} SELECT ${usageOutcome}`)) as unknown as UsageOutcome
  return outcome.usage_inserted + second.usage_inserted
}

/** Records usage events; returns how many were new (dedupe hits are not counted). */
export async function recordUsage(tx: Queries, usage: UsageInput | readonly UsageInput[]): Promise<number> {
  const list = Array.isArray(usage) ? (usage as readonly UsageInput[]) : [usage as UsageInput]
  if (list.length === 0) return 0
  const rows = usageRows(list)
  const outcome = (await tx.one(sql.unsafe`WITH ${usageCtes(rows)} SELECT ${usageOutcome}`)) as unknown as UsageOutcome
  return finishUsage(tx, list, rows, outcome)
}

/** The dedupe key of the daily number rental (contract D7: 1 unit per number per UTC day held). */
export function numberRentalKey(tenantId: string, number: string, at: number): string {
  return `number_rental:${tenantId}:${number}:${iso(at).slice(0, 10)}`
}

/** Daily job: one number_rental unit for every number a tenant holds on the UTC day of `at`. */
export async function recordNumberRentals(db: Db, at: number): Promise<number> {
  return guard(async () => {
    const held = (await db.any(sql.unsafe`
      SELECT number, tenant_id FROM proxy_numbers WHERE tenant_id IS NOT NULL ORDER BY number`)) as readonly { number: string; tenant_id: string }[]
    let n = 0
    for (let i = 0; i < held.length; i += 500) {
      const chunk = held.slice(i, i + 500).map(h => ({
        tenantId: h.tenant_id, metric: 'number_rental' as const, quantity: 1, at,
        dedupeKey: numberRentalKey(h.tenant_id, h.number, at), metadata: { proxyNumber: h.number },
      }))
      n += await transact(db, tx => recordUsage(tx, chunk))
    }
    return n
  })
}

/** Contract 2.5, raw and snake_case: quantity and unit_price are decimal strings. */
export interface BillingEventRow {
  id: string
  tenant_id: string
  billing_period_id: string
  metric: Metric
  quantity: string
  unit_price: string | null
  recorded_at: string
  session_id: string | null
  call_record_id: string | null
  metadata: Record<string, unknown>
}

export async function listBillingEvents(db: Db, q: {
  tenantId: string; periodStart: number | string; periodEnd: number | string; metric?: Metric | string; limit: number; offset?: number
}): Promise<BillingEventRow[]> {
  return guard(async () => {
    const rows = (await db.any(sql.unsafe`
      SELECT id, tenant_id, billing_period_id, metric, trim_scale(quantity)::text AS quantity,
             trim_scale(unit_price)::text AS unit_price, recorded_at, session_id, call_record_id, metadata
      FROM billing_events
      WHERE tenant_id = ${q.tenantId} AND recorded_at >= ${tsOf(q.periodStart)} AND recorded_at < ${tsOf(q.periodEnd)}
        ${q.metric ? sql.fragment`AND metric = ${q.metric}` : sql.fragment``}
      ORDER BY recorded_at, id
      LIMIT ${q.limit} OFFSET ${q.offset ?? 0}`)) as readonly (Omit<BillingEventRow, 'recorded_at'> & { recorded_at: number })[]
    return rows.map(r => ({ ...r, recorded_at: iso(r.recorded_at) }))
  })
}

export interface PeriodView {
  id: string
  periodStart: string
  periodEnd: string
  status: string
  createdAt: string
  closedAt: string | null
}

/** Newest first; `after` is the id of the last period of the previous page. */
export async function listPeriods(db: Db, q: { tenantId: string; limit: number; after?: string | undefined }): Promise<'bad-cursor' | { data: PeriodView[]; after: string | null }> {
  if (q.after !== undefined && !isUuid(q.after)) return 'bad-cursor'
  return guard(async () => {
    const rows = (await db.any(sql.unsafe`
      SELECT id, period_start, period_end, status, created_at, closed_at FROM billing_periods
      WHERE tenant_id = ${q.tenantId}
        ${q.after ? sql.fragment`AND (period_start, id) < (SELECT period_start, id FROM billing_periods
                                                          WHERE id = ${q.after} AND tenant_id = ${q.tenantId})` : sql.fragment``}
      ORDER BY period_start DESC, id DESC
      LIMIT ${q.limit + 1}`)) as readonly { id: string; period_start: number; period_end: number; status: string; created_at: number; closed_at: number | null }[]
    const page = rows.slice(0, q.limit).map(r => ({
      id: r.id, periodStart: iso(r.period_start), periodEnd: iso(r.period_end), status: r.status,
      createdAt: iso(r.created_at), closedAt: isoOrNull(r.closed_at),
    }))
    return { data: page, after: rows.length > q.limit ? page[page.length - 1]!.id : null }
  })
}

/** Contract 4.5/4.6 usage: sums per metric (whole units) and the number of events, start inclusive. */
export async function usageTotals(db: Db, tenantId: string, from: number | string, to: number | string): Promise<{ metrics: Record<Metric, number>; totalEvents: number }> {
  return guard(async () => {
    const rows = (await db.any(sql.unsafe`
      SELECT metric, round(sum(quantity))::int8 AS total, count(*)::int8 AS events FROM billing_events
      WHERE tenant_id = ${tenantId} AND recorded_at >= ${tsOf(from)} AND recorded_at < ${tsOf(to)}
      GROUP BY metric`)) as readonly { metric: Metric; total: number; events: number }[]
    const metrics = Object.fromEntries(METRICS.map(m => [m, 0])) as Record<Metric, number>
    let totalEvents = 0
    for (const r of rows) {
      metrics[r.metric] = r.total
      totalEvents += r.events
    }
    return { metrics, totalEvents }
  })
}

export interface PricingView {
  id: string
  tier: string
  metric: Metric
  unitPrice: number
  includedQuantity: number
  overagePrice: number
  currency: string
  effectiveFrom: string
  effectiveUntil: string | null
}

/** Contract 4.6 pricing, camelCase with numeric prices. Current rows only unless `all`. */
export async function listPricing(db: Db, opts: { all?: boolean } = {}): Promise<PricingView[]> {
  return guard(async () => {
    const rows = (await db.any(sql.unsafe`
      SELECT id, tier, metric, unit_price::float8 AS unit_price, included_quantity::float8 AS included_quantity,
             overage_price::float8 AS overage_price, currency, effective_from, effective_until
      FROM pricing ${opts.all ? sql.fragment`` : sql.fragment`WHERE effective_until IS NULL`}
      ORDER BY array_position(ARRAY['STARTER','GROWTH','ENTERPRISE'], tier), metric, effective_from`)) as readonly {
      id: string; tier: string; metric: Metric; unit_price: number; included_quantity: number; overage_price: number
      currency: string; effective_from: number; effective_until: number | null
    }[]
    return rows.map(r => ({
      id: r.id, tier: r.tier, metric: r.metric, unitPrice: r.unit_price, includedQuantity: r.included_quantity,
      overagePrice: r.overage_price, currency: r.currency, effectiveFrom: iso(r.effective_from), effectiveUntil: isoOrNull(r.effective_until),
    }))
  })
}

/** Epoch ms, or an ISO 8601 string as the API received it. */
function tsOf(t: number | string) {
  return typeof t === 'number' ? ts(t) : sql.fragment`${t}::timestamptz`
}
