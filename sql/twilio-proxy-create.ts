// The Twilio Proxy façade's session create in few round trips (docs/twilio-proxy.md): what the
// choice of proxy numbers needs, read in one statement for every participant of the request; the
// session and its participants written in one; the native session linked in one. The partial
// unique index on (identifier_hash, proxy_number) stays the arbiter of concurrent creates: a pair
// another create holds is not inserted, and the caller chooses again.
import { sql } from 'slonik'
import { guard, StoreError } from './errors.js'
import { SESSION_COLUMNS, type NewParticipant, type NewSession, type SessionRow } from './twilio-proxy-sessions.js'
import { ts, tsOrNull, type Db } from './transaction.js'

export interface ChoicePoolEntry { number: string; is_reserved: boolean; in_use: number }

/** The Service's pool (oldest first; `in_use`: open sessions with an active participant on the number) and, by identifier hash, its active numbers and its last number in the Service. */
export interface ChoiceInputs {
  pool: ChoicePoolEntry[]
  identifiers: Map<string, { active: string[]; last: string | null }>
}

export async function choiceInputs(db: Db, serviceId: string, hashes: readonly string[]): Promise<ChoiceInputs> {
  return guard(async () => {
    const row = await db.one(sql.unsafe`
      WITH pool AS (SELECT number, is_reserved, created_at FROM twilio_phone_numbers WHERE service_id = ${serviceId}),
      used AS (
        SELECT proxy_number, count(DISTINCT session_id)::int AS n FROM twilio_participants
        WHERE active AND proxy_number IN (SELECT number FROM pool) GROUP BY proxy_number)
      SELECT
        (SELECT coalesce(json_agg(json_build_object('number', p.number, 'is_reserved', p.is_reserved, 'in_use', coalesce(u.n, 0))
           ORDER BY p.created_at, p.number), '[]'::json)::text
         FROM pool p LEFT JOIN used u ON u.proxy_number = p.number) AS pool,
        (SELECT coalesce(json_agg(json_build_object(
           'hash', h,
           'active', (SELECT coalesce(json_agg(proxy_number), '[]'::json) FROM twilio_participants WHERE identifier_hash = h AND active),
           'last', (SELECT proxy_number FROM twilio_participants WHERE service_id = ${serviceId} AND identifier_hash = h ORDER BY created_at DESC LIMIT 1))), '[]'::json)::text
         FROM unnest(${sql.array([...hashes], 'text')}) h) AS identifiers`) as { pool: string; identifiers: string }
    const ids = JSON.parse(row.identifiers) as { hash: string; active: string[]; last: string | null }[]
    return { pool: JSON.parse(row.pool) as ChoicePoolEntry[], identifiers: new Map(ids.map(i => [i.hash, { active: i.active, last: i.last }])) }
  })
}

/**
 * The session and its participants in one statement: 'conflict' when the UniqueName is taken in
 * the Service (nothing written); else the ids of the participants written, a participant whose
 * pair another active session holds left out.
 */
export async function insertSessionWith(db: Db, s: NewSession, parts: readonly NewParticipant[]): Promise<Set<string> | 'conflict'> {
  const values = parts.map(p => sql.fragment`(${p.id}::uuid, ${p.session_id}::uuid, ${p.service_id}::uuid, ${p.tenant_id}::uuid, ${sql.binary(p.identifier_enc)}::bytea,
    ${p.identifier_hash}::text, ${p.friendly_name}::text, ${p.proxy_number}::text, ${p.active}::boolean, ${ts(p.created_at)}::timestamptz, ${ts(p.created_at)}::timestamptz)`)
  const participants = parts.length === 0 ? sql.fragment`SELECT NULL::uuid AS id WHERE false` : sql.fragment`
    INSERT INTO twilio_participants (id, session_id, service_id, tenant_id, identifier_enc, identifier_hash, friendly_name, proxy_number, active, created_at, updated_at)
    SELECT v.* FROM (VALUES ${sql.join(values, sql.fragment`, `)}) v JOIN s ON s.id = v.column2
    ON CONFLICT (identifier_hash, proxy_number) WHERE active DO NOTHING RETURNING id`
  try {
    return await guard(async () => new Set(await db.anyFirst(sql.unsafe`
      WITH s AS (
        INSERT INTO twilio_sessions (id, service_id, tenant_id, unique_name, status, mode, ttl, date_expiry, expires_at, date_started, created_at, updated_at)
        VALUES (${s.id}, ${s.service_id}, ${s.tenant_id}, ${s.unique_name}, ${s.status}, ${s.mode}, ${s.ttl}, ${tsOrNull(s.date_expiry)},
          ${tsOrNull(s.expires_at)}, ${tsOrNull(s.date_started)}, ${ts(s.created_at)}, ${ts(s.created_at)})
        RETURNING id),
      p AS (${participants})
      SELECT id FROM p`) as string[]))
  } catch (err) {
    if (err instanceof StoreError && err.slug === 'conflict') return 'conflict'
    throw err
  }
}

/** The native session opened for a façade session (its agent, first, and customer participants) is linked, and the session row names it: the row. */
export async function linkNative(db: Db, l: { nativeId: string; sessionId: string; agentId: string; customerId: string }, now: number): Promise<SessionRow> {
  return guard(async () => await db.one(sql.unsafe`
    WITH l AS (
      INSERT INTO twilio_native_sessions (native_id, session_id, agent_participant_id, customer_participant_id)
      VALUES (${l.nativeId}, ${l.sessionId}, ${l.agentId}, ${l.customerId}) ON CONFLICT DO NOTHING)
    UPDATE twilio_sessions SET native_session_id = ${l.nativeId}, updated_at = ${ts(now)} WHERE id = ${l.sessionId}
    RETURNING ${SESSION_COLUMNS}`) as SessionRow)
}
