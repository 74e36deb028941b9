// A session's transition as the engine planned it (PATCH, swap, end, activation), written under
// optimistic concurrency on its version; and its last activity as the store knows it (contract D10).
import { sql, type FragmentSqlToken, type SerializableValue } from 'slonik'
import type { EventEnvelope } from './vocabulary/event-envelope.js'
import { uuidv7 } from './vocabulary/ids.js'
import { type SessionRecord } from '../engine/types.js'
import { lastCallAt } from './call-count.js'
import { isUuid } from './cursor.js'
import { guard, withRetry } from './errors.js'
import { insertOutbox, outboxInsertFrom } from './outbox.js'
import { directPool, directTransaction, PREPARE, type Queries } from './direct.js'
import { jsonb, rollback, transact, ts, tsOrNull, type Db, type Rollback } from './transaction.js'
import { isLive, isPool } from './session-common.js'
import { releaseSessions } from './session-expiry.js'

export interface SwapArgs {
  oldCustomerHash: string
  newCustomerHash: string
  newCustomerEnc: Buffer
}

export interface UpdateSessionArgs {
  prev: SessionRecord
  /** The new state; its `version` is stored (normally prev.version + 1). */
  next: SessionRecord
  /** Shallow merge into metadata (contract 4.2 PATCH). */
  metadataPatch?: Record<string, unknown>
  swap?: SwapArgs
  audit?: { action: string; data: object }
  events: EventEnvelope[]
  /** contract D10: the inactivity clock restarts here (a PATCH that changed the timeout). */
  activityFrom?: number
}

/**
 * Writes a transition computed by the engine, if nobody changed the session since `prev`
 * (optimistic concurrency on version): 'stale' means reload and plan again. A swap replaces the
 * customer's participant row ('proxy-conflict' when the new customer is taken on this proxy).
 * Leaving the live states releases the session's participants, quota and proxy.
 */
export async function updateSession(db: Db, a: UpdateSessionArgs): Promise<'ok' | 'stale' | 'proxy-conflict'> {
  const { prev, next } = a
  const direct = isPool(db) ? directPool(db) : null
  if (!(isLive(prev.state) && !isLive(next.state))) {
    // No release: one statement, committed on its own (a target swap was five statements
    // and BEGIN/COMMIT, seven round trips and ~3 ms before its event could leave for the sockets).
    const q = direct ? direct.queries : db
    const r = (await guard(() => withRetry(() => q.one(changeStatement(a))))) as { found: number; written: number }
    return r.found === 0 ? 'stale' : r.written === 0 ? 'proxy-conflict' : 'ok'
  }
  type Outcome = 'ok' | 'stale'
  const work = async (tx: Queries): Promise<Outcome | Rollback<Outcome>> => {
    const row = (await tx.maybeOne(sql.unsafe`${PREPARE}
      UPDATE sessions SET ${sessionSet(a)}
      WHERE id = ${prev.id} AND version = ${prev.version}
      RETURNING tenant_id`)) as { tenant_id: string } | null
    if (!row) return rollback('stale')
    if (a.audit) {
      await tx.query(sql.unsafe`${PREPARE}
        INSERT INTO audit_log (id, tenant_id, action, target_id, data, created_at)
        VALUES (${uuidv7()}, ${row.tenant_id}, ${a.audit.action}, ${prev.id}, ${sql.jsonb(a.audit.data as SerializableValue)}, now())`)
    }
    await insertOutbox(tx, a.events, prev.id)
    await releaseSessions(tx, sql.fragment`gone AS (SELECT id, tenant_id, proxy_number, customer_proxy_number FROM sessions WHERE id = ${prev.id})`)
    return 'ok'
  }
  // Given a pool, on the plain `pg` path with its statements named (sql/direct.ts): an end is five
  // or six statements, and slonik's per-query work and its unnamed statements' parse and plan made
  // each take ~6 ms of the service's time at p50.
  return direct ? guard(() => withRetry(() => directTransaction(direct, work))) : transact<Outcome>(db, work)
}

/** The SET list of updateSession: the engine's new state of the session, and what the change adds. */
function sessionSet(a: UpdateSessionArgs): FragmentSqlToken {
  const { next, swap } = a
  return sql.fragment`
    state = ${next.state}, direction_mode = ${next.directionMode},
    grace_period_minutes = ${next.gracePeriodMinutes}, max_duration_minutes = ${next.maxDurationMinutes},
    recording_enabled = ${next.recordingEnabled}, consent_prompt = ${next.consentPrompt},
    expires_at = ${ts(next.expiresAt)}, activated_at = ${ts(next.activatedAt)},
    ended_at = ${tsOrNull(next.endedAt)}, expired_at = ${tsOrNull(next.expiredAt)},
    metadata = ${a.metadataPatch ? sql.fragment`metadata || ${sql.jsonb(a.metadataPatch as SerializableValue)}` : sql.fragment`metadata`},
    customer_hash = ${swap ? swap.newCustomerHash : sql.fragment`customer_hash`},
    customer_phone_enc = ${swap ? sql.binary(swap.newCustomerEnc) : sql.fragment`customer_phone_enc`},
    inactivity_timeout_minutes = ${next.inactivityTimeoutMinutes ?? null},
    activity_at = ${a.activityFrom !== undefined ? ts(a.activityFrom) : sql.fragment`activity_at`},
    version = ${next.version}`
}

/**
 * A change that keeps the session live, as one statement: `cur` locks the row if it is still at
 * `prev.version` (READ COMMITTED re-checks the version on the newest row); a swap then claims the
 * new customer on the proxy, and everything else happens only if it did, so a 'proxy-conflict'
 * changes nothing. found = 0: stale; written = 0: the claim failed.
 */
function changeStatement(a: UpdateSessionArgs) {
  const { prev, swap } = a
  const claim = swap !== undefined && isLive(prev.state)
  const gate = claim ? sql.fragment`AND EXISTS (SELECT FROM ins)` : sql.fragment``
  return sql.unsafe`${PREPARE}
    WITH cur AS MATERIALIZED (
      SELECT id, COALESCE(customer_proxy_number, proxy_number) AS proxy_number FROM sessions -- the customer's (docs/dual-proxy.md)
      WHERE id = ${prev.id} AND version = ${prev.version}
      FOR NO KEY UPDATE),
    ${claim ? sql.fragment`
    ins AS (
      INSERT INTO session_participants (proxy_number, party_hash, session_id)
      SELECT proxy_number, ${swap.newCustomerHash}, id FROM cur
      ON CONFLICT DO NOTHING RETURNING 1),
    del AS (
      DELETE FROM session_participants p USING cur
      WHERE p.proxy_number = cur.proxy_number AND p.party_hash = ${swap.oldCustomerHash} AND p.session_id = cur.id ${gate}),` : sql.fragment``}
    upd AS (
      UPDATE sessions SET ${sessionSet(a)}
      WHERE id = (SELECT id FROM cur) ${gate}
      RETURNING id, tenant_id)
    ${a.audit ? sql.fragment`, aud AS (
      INSERT INTO audit_log (id, tenant_id, action, target_id, data, created_at)
      SELECT ${uuidv7()}, tenant_id, ${a.audit.action}, id, ${sql.jsonb(a.audit.data as SerializableValue)}, now() FROM upd)` : sql.fragment``}
    ${a.events.length > 0 ? sql.fragment`, ob AS (${outboxInsertFrom(sql.fragment`
      SELECT x FROM jsonb_array_elements(${jsonb(a.events)}) AS x WHERE EXISTS (SELECT FROM upd)`, prev.id)})` : sql.fragment``}
    SELECT (SELECT count(*) FROM cur)::int AS found, (SELECT count(*) FROM upd)::int AS written`
}

/**
 * contract D10: a session's last activity as the store knows it: the start of its inactivity clock
 * (creation, or the PATCH that set the timeout), its last call (its call records, written by
 * whatever node routed it) and its last SMS (one probe of sms_records_session_sent).
 */
export function lastActivity(s: FragmentSqlToken) {
  return sql.fragment`GREATEST(COALESCE(${s}.activity_at, ${s}.created_at), ${lastCallAt(s)},
    (SELECT max(sr.sent_at) FROM sms_records sr WHERE sr.session_id = ${s}.id))`
}

/** contract D10: lastActivity of one session in epoch ms; null when the session is unknown. */
export async function getLastActivity(db: Db, id: string): Promise<number | null> {
  if (!isUuid(id)) return null
  return guard(async () => {
    const at = await db.maybeOneFirst(sql.unsafe`SELECT ${lastActivity(sql.fragment`s`)} FROM sessions s WHERE s.id = ${id}`)
    return at === null ? null : Number(at)
  })
}
