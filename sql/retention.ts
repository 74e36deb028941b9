// Data retention (contract 8.7, contract D1 RETENTION_DAYS): call and SMS records older than the
// retention period are deleted, at least 30 days of them are always kept. Deletes run in batches
// so a large purge never holds long locks. Idempotency keys past their 24 h are dropped too.
// Only these children are ever deleted: tenants and sessions never are, which is what lets the
// write-hot record tables go without foreign keys (migration 005).
// The outbox is not purged here: a node replays to its WebSocket clients what the bus lost from it
// (gateway/replay.ts, at most 10 minutes back) and a client resumes the stream from it
// (`GET /v1/stream?after=`, STREAM_REPLAY_HOURS, at most RETENTION_DAYS: gateway/config.ts); a purge
// of it must keep at least STREAM_REPLAY_HOURS.
import { sql } from 'slonik'
import { guard } from './errors.js'
import type { Db } from './transaction.js'

const BATCH = 5_000
const MIN_RETENTION_DAYS = 30

export async function purgeOldRecords(db: Db, days: number): Promise<{ calls: number; sms: number; idempotencyKeys: number }> {
  const keep = Math.max(MIN_RETENTION_DAYS, Math.floor(days))
  const cutoff = sql.fragment`now() - make_interval(days => ${keep})`
  // Calls: tenant by tenant on call_records_tenant_initiated (tenant_id, initiated_at), the index
  // the API's period filters use; the global (initiated_at) index went in migration 005, one
  // index fewer on every call insert. A tenant with nothing to purge costs one index probe.
  const oldCalls = sql.fragment`
    SELECT c.id FROM tenants t
    CROSS JOIN LATERAL (
      SELECT id FROM call_records WHERE tenant_id = t.id AND initiated_at < ${cutoff} LIMIT ${BATCH}) c
    LIMIT ${BATCH}`
  // SMS: on sms_records_sent (sent_at).
  const oldSms = sql.fragment`SELECT id FROM sms_records WHERE sent_at < ${cutoff} LIMIT ${BATCH}`
  // `id = ANY(ARRAY(…))`: the batch's ids are deleted through the primary key; `id IN (…)` let
  // the planner hash them and scan the whole table instead.
  return guard(async () => {
    const purge = async (batch: ReturnType<typeof sql.unsafe>) => {
      let total = 0
      for (;;) {
        const n = (await db.oneFirst(batch)) as number
        total += n
        if (n < BATCH) return total
      }
    }
    // contract 2.2 callCount / lastCallAt count purged calls too (migration 011): the statement that
    // deletes records adds them to their sessions' purged_calls / purged_last_call_at, so a reader
    // sees either the records or the sum. Rows locked in id order, as the expiry sweep locks them.
    const calls = await purge(sql.unsafe`
      WITH d AS (DELETE FROM call_records WHERE id = ANY(ARRAY(${oldCalls})) RETURNING session_id, initiated_at),
      locked AS MATERIALIZED (
        SELECT id FROM sessions WHERE id IN (SELECT session_id FROM d) ORDER BY id FOR NO KEY UPDATE),
      kept AS (
        UPDATE sessions s SET purged_calls = s.purged_calls + x.n, purged_last_call_at = GREATEST(s.purged_last_call_at, x.at)
        FROM (SELECT session_id, count(*)::int AS n, max(initiated_at) AS at FROM d GROUP BY session_id) x
        JOIN locked l ON l.id = x.session_id
        WHERE s.id = x.session_id)
      SELECT count(*) FROM d`)
    const sms = await purge(sql.unsafe`
      WITH d AS (DELETE FROM sms_records WHERE id = ANY(ARRAY(${oldSms})) RETURNING 1)
      SELECT count(*) FROM d`)
    const idempotencyKeys = (await db.oneFirst(sql.unsafe`
      WITH d AS (DELETE FROM idempotency_keys WHERE created_at < now() - interval '24 hours' RETURNING 1)
      SELECT count(*) FROM d`)) as number
    return { calls, sms, idempotencyKeys }
  })
}
