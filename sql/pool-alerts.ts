// Pool alerts and refused creates (contract D12, migration 009). Both are rare: a level
// changes a few times a day at most, a refusal answers 503 anyway; neither is on a hot path.
import { sql } from 'slonik'
import type { EventEnvelope } from './vocabulary/event-envelope.js'
import { guard } from './errors.js'
import { insertOutbox } from './outbox.js'
import { iso, transact, type Db } from './transaction.js'

/** The cluster's level of every region (a node's engine starts from it at boot). */
export async function loadPoolAlertLevels(db: Db): Promise<Array<{ region: string; level: number }>> {
  return guard(async () => (await db.any(sql.unsafe`SELECT region, level FROM pool_alert_levels`)) as Array<{ region: string; level: number }>)
}

/**
 * Moves the region's level to `to` when that is a crossing the cluster has not recorded yet (a
 * deeper level, or back to 0 from a low one), and writes `envelopes` (one per tenant with live
 * sessions in the region: the engine knows them, Engine.tenantsLiveIn) in the same transaction.
 * Null: another node recorded it first (or the cluster is already there): nothing to emit.
 */
export async function recordPoolCrossing(db: Db, region: string, to: number, envelopes: EventEnvelope[]): Promise<EventEnvelope[] | null> {
  return transact(db, async tx => {
    const moved = to > 0
      ? await tx.maybeOneFirst(sql.unsafe`
          INSERT INTO pool_alert_levels AS l (region, level) VALUES (${region}, ${to})
          ON CONFLICT (region) DO UPDATE SET level = excluded.level, changed_at = now() WHERE l.level < excluded.level
          RETURNING 1`)
      : await tx.maybeOneFirst(sql.unsafe`
          UPDATE pool_alert_levels SET level = 0, changed_at = now() WHERE region = ${region} AND level > 0 RETURNING 1`)
    if (moved === null) return null
    await insertOutbox(tx, envelopes)
    return envelopes
  })
}

/** One create refused with pool-exhausted, counted in its tenant's UTC hour. */
export async function recordPoolRefusal(db: Db, tenantId: string, at: number): Promise<void> {
  await guard(() => db.query(sql.unsafe`
    INSERT INTO pool_refusals AS r (tenant_id, hour, count) VALUES (${tenantId}, date_trunc('hour', ${iso(at)}::timestamptz AT TIME ZONE 'UTC') AT TIME ZONE 'UTC', 1)
    ON CONFLICT (tenant_id, hour) DO UPDATE SET count = r.count + 1`))
}
