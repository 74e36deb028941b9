// SMS opt-outs (contract D11, migration 007): by tenant, proxy and party hash, never a number. The
// SMS path reads them from memory (engine/sms-opt-out.ts OptOutSet); this is what fills it (boot,
// reconciliation) and the direct, durable writes of STOP and START (api/cpaas/sms/opt-out.ts).
import { sql } from 'slonik'
import { guard } from './errors.js'
import type { Db } from './transaction.js'

export interface OptOutRow { tenantId: string; proxy: string; partyHash: string; optedOut: boolean }
export interface OptOutKey { tenantId: string; proxy: string; partyHash: string }

/** Boot: every party opted out now. */
export async function loadOptOuts(db: Db): Promise<OptOutRow[]> {
  return guard(async () => (await db.any(sql.unsafe`
    SELECT tenant_id AS "tenantId", proxy, party_hash AS "partyHash", opted_out AS "optedOut"
    FROM sms_opt_outs WHERE opted_out`)) as OptOutRow[])
}

/** The watermark a full read taken now would leave: take it BEFORE the boot load. */
export async function optOutWatermark(db: Db): Promise<string> {
  return guard(async () => String(await db.oneFirst(sql.unsafe`SELECT pg_snapshot_xmin(pg_current_snapshot())::text`)))
}

/**
 * Rows written by a transaction at or above `since`, and the next watermark, in one statement
 * (see sql/session-changes.ts: the same exact watermark over transaction ids).
 */
export async function optOutChangesSince(db: Db, since: string): Promise<{ changes: OptOutRow[]; next: string }> {
  return guard(async () => {
    const rows = (await db.any(sql.unsafe`
      SELECT w.xmin::text AS next, o.tenant_id AS "tenantId", o.proxy, o.party_hash AS "partyHash", o.opted_out AS "optedOut"
      FROM (SELECT pg_snapshot_xmin(pg_current_snapshot()) AS xmin) w
      LEFT JOIN sms_opt_outs o ON o.change_xid >= ${since}::xid8`)) as readonly (OptOutRow & { next: string; tenantId: string | null })[]
    const changes: OptOutRow[] = []
    for (const r of rows) if (r.tenantId !== null) changes.push({ tenantId: r.tenantId, proxy: r.proxy, partyHash: r.partyHash, optedOut: r.optedOut })
    return { changes, next: rows[0]!.next }
  })
}

/**
 * STOP: the party is opted out, committed before this resolves. `confirm`: this message opted the
 * party out (or is a retry of the one that did) and its confirmation has not been sent; `opted-out`:
 * opted out before, by another message, or the confirmation went already: nothing to send.
 */
export async function optOut(db: Db, k: OptOutKey, messageId: string): Promise<'confirm' | 'opted-out'> {
  return guard(async () => {
    const row = await db.one(sql.unsafe`
      INSERT INTO sms_opt_outs AS o (tenant_id, proxy, party_hash, opted_out, stop_message_id)
      VALUES (${k.tenantId}, ${k.proxy}, ${k.partyHash}, true, ${messageId})
      ON CONFLICT (tenant_id, proxy, party_hash) DO UPDATE SET
        opted_out = true,
        stop_message_id = CASE WHEN o.opted_out THEN o.stop_message_id ELSE excluded.stop_message_id END,
        confirmed_at = CASE WHEN o.opted_out THEN o.confirmed_at ELSE NULL END,
        updated_at = CASE WHEN o.opted_out THEN o.updated_at ELSE now() END,
        change_xid = CASE WHEN o.opted_out THEN o.change_xid ELSE pg_current_xact_id() END
      RETURNING stop_message_id, confirmed_at`) as { stop_message_id: string | null; confirmed_at: unknown }
    return row.stop_message_id === messageId && row.confirmed_at === null ? 'confirm' : 'opted-out'
  })
}

/** The confirmation of `messageId`'s STOP was handed to the provider (or maybe was): never again. */
export async function markOptOutConfirmed(db: Db, k: OptOutKey, messageId: string): Promise<void> {
  await guard(() => db.query(sql.unsafe`
    UPDATE sms_opt_outs SET confirmed_at = now()
    WHERE tenant_id = ${k.tenantId} AND proxy = ${k.proxy} AND party_hash = ${k.partyHash} AND stop_message_id = ${messageId}`))
}

/** START: the party opts back in; true when it was opted out. */
export async function optIn(db: Db, k: OptOutKey): Promise<boolean> {
  return guard(async () => (await db.query(sql.unsafe`
    UPDATE sms_opt_outs SET opted_out = false, updated_at = now(), change_xid = pg_current_xact_id()
    WHERE tenant_id = ${k.tenantId} AND proxy = ${k.proxy} AND party_hash = ${k.partyHash} AND opted_out`)).rowCount > 0)
}
