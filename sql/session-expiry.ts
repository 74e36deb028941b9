// Sessions leaving the live states: expiry (contract 3.1), inactivity ends (contract D10), and the
// release of their participants, quota and proxy that every exit shares.
import { sql, type FragmentSqlToken, type SerializableValue } from 'slonik'
import type { EventEnvelope } from './vocabulary/event-envelope.js'
import { type SessionRecord } from '../engine/types.js'
import { insertOutbox } from './outbox.js'
import { type Queries } from './direct.js'
import { iso, transact, type Db } from './transaction.js'
import { LIVE } from './session-common.js'
import { lastActivity } from './session-update.js'

/**
 * The bookkeeping of sessions that just left the live states. `goneCtes` defines a CTE `gone`
 * producing (id, tenant_id, proxy_number, customer_proxy_number): their participant rows go (the
 * parties are unwired), the tenants' and proxies' live counters drop (both numbers of a dual-proxy
 * session, docs/dual-proxy.md), and a proxy whose count reaches 0 is released (no tenant, cooldown
 * starts). Counters never go below 0, so a drift cannot block expiry.
 *
 * Lock order (creates and expiry sweeps deadlocked): every statement that moves these
 * counters locks the tenant rows first (by id), then the proxy rows (by number), then touches the
 * participant rows, as createSession does (q, then p, then parts) and bulkInsertSessions (tenants,
 * then proxies). Two statements:
 * 1. The locks. Left to itself Postgres runs a statement's unread CTEs in no promised order and a
 *    multi-row lock in its join's order, so the order is forced: lock_t and lock_p take the row
 *    locks in ORDER BY order, and lock_p starts only once lock_t has counted all its rows (an
 *    uncorrelated scalar subquery is evaluated, in full, before the node it gates reads a row).
 * 2. The writes, in a statement of their own, so with a snapshot taken once every row they change
 *    is held. Written in the locking statement they deadlocked (once the outbox's key to
 *    tenants was gone: migration 010): a tenant row updated by another transaction after that
 *    statement's snapshot is locked by lock_t in its newest version, but the UPDATE then meets the
 *    older version of its snapshot and queues for that version's tuple lock behind the transactions
 *    waiting for this one (the hazard createSession's comment describes). The outbox key's check had
 *    hidden it by share-locking the tenant row earlier in the transaction.
 * Callers lock the session rows before this (their own order, by id).
 */
/** The numbers the gone sessions held, one row per session and number. */
const HELD = sql.fragment`held AS (
  SELECT proxy_number AS number FROM gone
  UNION ALL SELECT customer_proxy_number FROM gone WHERE customer_proxy_number IS NOT NULL)`

export async function releaseSessions(tx: Queries, goneCtes: FragmentSqlToken) {
  await tx.query(sql.unsafe`
    WITH ${goneCtes}, ${HELD},
    lock_t AS (
      SELECT count(*) AS n FROM (
        SELECT 1 FROM tenants WHERE id IN (SELECT tenant_id FROM gone) ORDER BY id FOR NO KEY UPDATE) l),
    lock_p AS (
      SELECT count(*) AS n FROM (
        SELECT 1 FROM proxy_numbers WHERE number IN (SELECT number FROM held) AND (SELECT n FROM lock_t) >= 0
        ORDER BY number FOR NO KEY UPDATE) l)
    SELECT n FROM lock_p`)
  return tx.any(sql.unsafe`
    WITH ${goneCtes}, ${HELD},
    del AS (
      DELETE FROM session_participants sp USING gone
      WHERE sp.session_id = gone.id RETURNING 1),
    t AS (
      UPDATE tenants SET live_sessions = GREATEST(tenants.live_sessions - c.n, 0)
      FROM (SELECT tenant_id, count(*)::int AS n FROM gone GROUP BY tenant_id) c
      WHERE tenants.id = c.tenant_id RETURNING 1),
    p AS (
      UPDATE proxy_numbers pn SET
        live_sessions = GREATEST(pn.live_sessions - c.n, 0),
        tenant_id = CASE WHEN pn.live_sessions - c.n <= 0 THEN NULL ELSE pn.tenant_id END,
        released_at = CASE WHEN pn.live_sessions - c.n <= 0 THEN now() ELSE pn.released_at END
      FROM (SELECT number, count(*)::int AS n FROM held GROUP BY number) c
      WHERE pn.number = c.number RETURNING 1)
    SELECT id FROM gone`)
}

const EXPIRE_BATCH = 500

/**
 * Expires sessions (contract 3.1: grace period elapsed, or hard timeout). Only rows still live are
 * changed, under row locks taken in id order, and only for those the bookkeeping is done and
 * `envelopesFor` is asked for events: session.expired is written exactly once however many nodes
 * (or a reboot) try. Returns the ids this call expired. One transaction per 500 sessions.
 *
 * The bookkeeping is a second statement, not a CTE of the first: under READ COMMITTED a statement
 * that waited for a session row (a concurrent swap) still reads other tables as of its start, and
 * would miss the participant row the swap inserted (left behind for good, blocking that party on
 * that proxy). The second statement's snapshot is taken once the session rows are held.
 */
export async function expireSessions(db: Db, recs: readonly SessionRecord[], envelopesFor: (rec: SessionRecord) => EventEnvelope[]): Promise<string[]> {
  const expired: string[] = []
  for (let i = 0; i < recs.length; i += EXPIRE_BATCH) {
    const batch = recs.slice(i, i + EXPIRE_BATCH)
    const byId = new Map(batch.map(r => [r.id as string, r]))
    const rows = batch.map(r => ({ id: r.id, expired_at: r.expiredAt === null ? null : iso(r.expiredAt) }))
    const ids = await transact(db, async tx => {
      const gone = (await tx.any(sql.unsafe`
        WITH cand AS (
          SELECT id FROM sessions
          WHERE id = ANY(${sql.array(batch.map(r => r.id), 'uuid')}) AND state IN ${LIVE}
          ORDER BY id FOR NO KEY UPDATE)
        UPDATE sessions s SET state = 'EXPIRED', expired_at = COALESCE(v.expired_at, now()), version = s.version + 1
        FROM cand JOIN jsonb_to_recordset(${sql.jsonb(rows as unknown as SerializableValue)}) AS v(id uuid, expired_at timestamptz)
          ON v.id = cand.id
        WHERE s.id = cand.id
        RETURNING s.id, s.tenant_id, s.proxy_number, s.customer_proxy_number`)) as readonly
        { id: string; tenant_id: string; proxy_number: string; customer_proxy_number: string | null }[]
      if (gone.length === 0) return []
      await releaseSessions(tx, sql.fragment`
        gone AS (
          SELECT * FROM unnest(${sql.array(gone.map(g => g.id), 'uuid')}, ${sql.array(gone.map(g => g.tenant_id), 'uuid')},
                               ${sql.array(gone.map(g => g.proxy_number), 'text')}, ${sql.array(gone.map(g => g.customer_proxy_number), 'text')})
            AS g(id, tenant_id, proxy_number, customer_proxy_number))`)
      const envelopes = gone.flatMap(d => envelopesFor(byId.get(d.id)!))
      await insertOutbox(tx, envelopes)
      return gone.map(d => d.id)
    })
    expired.push(...ids)
  }
  return expired
}

export interface IdleEnd {
  /** The ACTIVE record memory held, and the GRACE_PERIOD one POST /end would make of it. */
  prev: SessionRecord
  next: SessionRecord
  /** No activity at or after this (epoch ms) for the end to be written. */
  idleBefore: number
}

/**
 * contract D10: inactivity ends, as POST /end (contract 3.1: GRACE_PERIOD, endedAt, expiresAt = now +
 * grace), each written only if the session is still at the version memory planned from, still
 * ACTIVE, and idle as the store knows it (lastActivity: calls and SMS of every node). Rows locked
 * in id order, as expireSessions: every node whose deadline fires tries, one writes. Returns the
 * ids ended, and for the others the store's last activity (to re-arm from). One transaction per
 * 500 sessions.
 */
export async function endIdleSessions(db: Db, ends: readonly IdleEnd[]): Promise<{ ended: string[]; activeAt: Map<string, number> }> {
  const ended: string[] = []
  const activeAt = new Map<string, number>()
  for (let i = 0; i < ends.length; i += EXPIRE_BATCH) {
    const batch = ends.slice(i, i + EXPIRE_BATCH)
    const rows = batch.map(e => ({
      id: e.prev.id, version: e.prev.version, next_version: e.next.version, ended_at: iso(e.next.endedAt ?? e.next.expiresAt),
      expires_at: iso(e.next.expiresAt), idle_before: iso(e.idleBefore),
    }))
    await transact(db, async tx => {
      const done = new Set((await tx.anyFirst(sql.unsafe`
        WITH v AS (
          SELECT * FROM jsonb_to_recordset(${sql.jsonb(rows as unknown as SerializableValue)})
            AS v(id uuid, version int, next_version int, ended_at timestamptz, expires_at timestamptz, idle_before timestamptz)),
        cand AS (SELECT id FROM sessions WHERE id IN (SELECT id FROM v) ORDER BY id FOR NO KEY UPDATE)
        UPDATE sessions s SET state = 'GRACE_PERIOD', ended_at = v.ended_at, expires_at = v.expires_at, version = v.next_version
        FROM cand JOIN v ON v.id = cand.id
        WHERE s.id = cand.id AND s.version = v.version AND s.state = 'ACTIVE' AND ${lastActivity(sql.fragment`s`)} <= v.idle_before
        RETURNING s.id`)) as readonly string[])
      ended.push(...done)
      const rest = batch.map(e => e.prev.id as string).filter(id => !done.has(id))
      if (rest.length === 0) return
      const seen = (await tx.any(sql.unsafe`
        SELECT s.id, ${lastActivity(sql.fragment`s`)} AS active_at FROM sessions s WHERE s.id = ANY(${sql.array(rest, 'uuid')})`)) as readonly { id: string; active_at: number }[]
      for (const r of seen) activeAt.set(r.id, Number(r.active_at))
    })
  }
  return { ended, activeAt }
}
