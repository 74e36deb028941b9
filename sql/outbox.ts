// The durable outbox (contract D6): events are written in the same transaction as the change that
// causes them, so an event exists exactly when its change committed. Delivery is the webhook
// dispatcher's job (sql/webhooks.ts). Envelope ids are the primary key: writing one twice is a
// no-op.
import { sql, type FragmentSqlToken } from 'slonik'
import type { Queries } from './direct.js'
import type { EventEnvelope } from './vocabulary/event-envelope.js'
import { jsonb, type Db } from './transaction.js'
import { guard } from './errors.js'
import { facadeCallbackWanted, INTERACTION_CALLBACK } from './twilio-proxy-callbacks.js'

const UUID_PATTERN = '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$'

/** `sessionId` defaults to each envelope's data.sessionId when that is a UUID. */
export async function insertOutbox(tx: Queries, envelopes: readonly EventEnvelope[], sessionId?: string): Promise<void> {
  if (envelopes.length === 0) return
  await tx.query(sql.unsafe`${outboxInsert(envelopes, sessionId)}`)
}

/** The INSERT of insertOutbox, to ride as a CTE in the statement of the change (one round trip). */
export function outboxInsert(envelopes: readonly EventEnvelope[], sessionId?: string) {
  return outboxInsertFrom(sql.fragment`SELECT x FROM jsonb_array_elements(${jsonb(envelopes)}) AS x`, sessionId)
}

/**
 * The same INSERT over any query yielding envelopes as a jsonb column `x` (e.g. filtered by a CTE).
 * `session`: the session id, or `{ column }` naming a uuid column of that query that holds it;
 * without it, each envelope's data.sessionId when that is a UUID. `fresh`: every id is new to the
 * outbox (envelopes minted for rows the same statement just inserted), so the insert needs no
 * ON CONFLICT, whose speculative insertion is ~2.5 µs of Postgres per row on the voice path
 * (bench/pg-call-insert.bench.ts); a duplicate id would then fail the statement instead of being
 * skipped.
 */
export function outboxInsertFrom(envelopes: FragmentSqlToken, session?: string | { column: string }, opts: { fresh?: boolean } = {}) {
  const sessionId = typeof session === 'object'
    ? sql.fragment`src.${sql.identifier([session.column])}`
    : sql.fragment`COALESCE(${session ?? null}::uuid,
                    CASE WHEN x->'data'->>'sessionId' ~ ${UUID_PATTERN} THEN (x->'data'->>'sessionId')::uuid END)`
  return sql.fragment`
    INSERT INTO outbox (id, tenant_id, session_id, type, envelope, created_at, next_attempt_at, done_at, outcome)
    SELECT e.id, e.tenant_id, e.session_id, e.type, e.env, e.created_at, now(),
           CASE WHEN w.wanted THEN NULL ELSE now() END,
           CASE WHEN w.wanted THEN NULL ELSE 'skipped' END
    FROM (SELECT (x->>'id')::uuid AS id, (x->'data'->>'tenantId')::uuid AS tenant_id, ${sessionId} AS session_id,
                 x->>'type' AS type, x AS env, (x->>'createdAt')::timestamptz AS created_at, (x->'data'->>'test') = 'true' AS test
          FROM (${envelopes}) AS src) e
    -- The dispatcher would skip an event no webhook of the tenant wants (gateway/webhooks/
    -- dispatcher.ts): decided here instead, so such an event costs one index lookup rather than a
    -- claim, a config read and an update (most of Postgres's work per callback in the bench).
    LEFT JOIN LATERAL (
      SELECT true AS wanted FROM webhook_configs c
      WHERE c.tenant_id = e.tenant_id
        AND (e.type = ANY(c.events) OR e.type = 'session.target_swapped' OR e.test)
      UNION ALL (${facadeCallbackWanted}) LIMIT 1) w ON true
    ${opts.fresh ? sql.fragment`` : sql.fragment`ON CONFLICT (id) DO NOTHING`}`
}

/**
 * The smallest UUIDv7 of the millisecond `ms`: `id > floorId(ms)` selects every event minted at or
 * after `ms` (issue 17, gateway/replay.ts). UUIDs compare bytewise, the first 48 bits are the time.
 */
export function floorId(ms: number): string {
  const h = Math.max(0, Math.floor(ms)).toString(16).padStart(12, '0')
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-0000-0000-000000000000`
}

/**
 * Events after `afterId` of the given tenants, oldest first, at most `limit` (issue 17: a node
 * replays to its WebSocket clients what the bus lost). `id > $1 ORDER BY id LIMIT n` is a range
 * scan of the outbox's primary key (ids are UUIDv7, so in time order) with the tenant as a filter:
 * no index of its own on the write-hot outbox.
 */
export async function outboxEventsAfter(db: Db, afterId: string, tenantIds: readonly string[], limit: number): Promise<EventEnvelope[]> {
  if (tenantIds.length === 0) return []
  const rows = await outboxRowsAfter(db, { afterId, tenantIds, limit })
  return rows.map(r => JSON.parse(r.json) as EventEnvelope)
}

/**
 * outboxEventsAfter's read with an upper bound and a type filter, each envelope as its JSON text
 * (a resumed WebSocket sends it as it is: gateway/stream/resume.ts). Same range scan of the key.
 */
export async function outboxRowsAfter(db: Db, q: { afterId: string; beforeId?: string; tenantIds: readonly string[]; types?: readonly string[] | null; limit: number }): Promise<Array<{ id: string; json: string }>> {
  const before = q.beforeId === undefined ? sql.fragment`` : sql.fragment`AND id < ${q.beforeId}::uuid`
  const types = q.types ? sql.fragment`AND type = ANY(${sql.array(q.types, 'text')})` : sql.fragment``
  return guard(async () => {
    const rows = await db.any(sql.unsafe`
      SELECT id, envelope::text AS json FROM outbox
      WHERE id > ${q.afterId}::uuid ${before} AND tenant_id = ANY(${sql.array(q.tenantIds, 'uuid')}) ${types}
        AND type <> ${INTERACTION_CALLBACK}
      ORDER BY id LIMIT ${q.limit}`) as ReadonlyArray<{ id: string; json: string }>
    return rows.map(r => ({ id: r.id, json: r.json }))
  })
}

/** Whether the tenant's outbox holds the event `id` (a resume cursor is one of its own events). */
export async function outboxHasEvent(db: Db, tenantId: string, id: string): Promise<boolean> {
  return guard(async () => (await db.maybeOneFirst(sql.unsafe`
    SELECT 1 FROM outbox WHERE id = ${id}::uuid AND tenant_id = ${tenantId}::uuid`)) !== null)
}
