// Data retention (spec 8.7, DECISIONS 1 RETENTION_DAYS): call and SMS records older than the
// retention period are deleted, at least 30 days of them are always kept. Deletes run in batches
// so a large purge never holds long locks. Idempotency keys past their 24 h are dropped too.
import { sql } from 'slonik'
import { guard } from './errors.js'
import type { Db } from './transaction.js'

const BATCH = 5_000
export const MIN_RETENTION_DAYS = 30

export async function purgeOldRecords(db: Db, days: number): Promise<{ calls: number; sms: number; idempotencyKeys: number }> {
  const keep = Math.max(MIN_RETENTION_DAYS, Math.floor(days))
  return guard(async () => {
    const purge = async (table: 'call_records' | 'sms_records', column: 'initiated_at' | 'sent_at') => {
      let total = 0
      for (;;) {
        const n = (await db.oneFirst(sql.unsafe`
          WITH d AS (
            DELETE FROM ${sql.identifier([table])} WHERE id IN (
              SELECT id FROM ${sql.identifier([table])}
              WHERE ${sql.identifier([column])} < now() - make_interval(days => ${keep})
              LIMIT ${BATCH})
            RETURNING 1)
          SELECT count(*) FROM d`)) as number
        total += n
        if (n < BATCH) return total
      }
    }
    const calls = await purge('call_records', 'initiated_at')
    const sms = await purge('sms_records', 'sent_at')
    const idempotencyKeys = (await db.oneFirst(sql.unsafe`
      WITH d AS (DELETE FROM idempotency_keys WHERE created_at < now() - interval '24 hours' RETURNING 1)
      SELECT count(*) FROM d`)) as number
    return { calls, sms, idempotencyKeys }
  })
}
