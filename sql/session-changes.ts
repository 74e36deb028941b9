// What changed in `sessions` since a watermark (docs/scaling.md, migration 006): the reconciliation
// sweep of api/app/reconcile.ts compares these (id, version, state) with the engine's memory and
// reloads only what differs. The watermark is a transaction id (xid8, as text): every transaction
// below it had finished when the read that returned it ran, so the next read from it misses
// nothing committed since, whatever the commit order (see 006_session_changes.sql).
import { sql } from 'slonik'
import type { SessionState } from '../engine/types.js'
import { guard } from './errors.js'
import type { Db } from './transaction.js'

export interface SessionChange { id: string; version: number; state: SessionState }

/** The watermark a full read taken now would leave: take it BEFORE the read (the boot load). */
export async function sessionChangeWatermark(db: Db): Promise<string> {
  return guard(async () => String(await db.oneFirst(sql.unsafe`SELECT pg_snapshot_xmin(pg_current_snapshot())::text`)))
}

/**
 * Sessions whose current version was written by a transaction at or above `since`, and the
 * watermark for the next call, read in one statement (one snapshot).
 */
export async function sessionChangesSince(db: Db, since: string): Promise<{ changes: SessionChange[]; next: string }> {
  return guard(async () => {
    const rows = (await db.any(sql.unsafe`
      SELECT w.xmin::text AS next, s.id, s.version, s.state
      FROM (SELECT pg_snapshot_xmin(pg_current_snapshot()) AS xmin) w
      LEFT JOIN sessions s ON s.change_xid >= ${since}::xid8`)) as readonly { next: string; id: string | null; version: number | null; state: SessionState | null }[]
    const changes: SessionChange[] = []
    for (const r of rows) if (r.id !== null) changes.push({ id: r.id, version: r.version!, state: r.state! })
    return { changes, next: rows[0]!.next }
  })
}
