// The session store behind the session runner (api/app/session-runner.ts). Postgres is the source
// of truth and the arbiter between nodes: the concurrent-session quota (spec 8.2), the one-tenant
// hold on a proxy (DECISIONS 4) and the participant-overlap rule (spec 3.1, the primary key of
// session_participants) are decided here, in the transaction that also writes the outbox events
// and the usage, so an event or a bill exists exactly when its change committed.
//
// Times in SessionRecord are epoch ms; views (what the API returns) carry ISO 8601 strings.
import { sql, type DatabasePool, type FragmentSqlToken, type QuerySqlToken, type SerializableValue } from 'slonik'
import type { EventEnvelope } from './vocabulary/event-envelope.js'
import { uuidv7 } from './vocabulary/ids.js'
import { ALL_CHANNELS, LIVE_STATES, type SessionRecord, type SessionState } from '../engine/types.js'
import { ensurePeriod, monthStart, numberRentalKey } from './billing.js'
import { callsJoin, lastCallAt } from './call-count.js'
import { decodeTimeCursor, encodeTimeCursor, isUuid } from './cursor.js'
import { guard, sqlStateOf, StoreError, withRetry } from './errors.js'
import { CreateBatcher, type BatchStats } from './create-batcher.js'
import { insertOutbox, outboxInsertFrom } from './outbox.js'
import { directPool, directTransaction, PREPARE, type DirectPool, type Queries } from './direct.js'
import { iso, isoOrNull, jsonb, rollback, transact, ts, tsOrNull, type Db, type Rollback } from './transaction.js'

export { bulkInsertSessions, type BulkSessionRow } from './bulk-sessions.js'
export { getLiveSessionState, getSessionRecord, loadLiveSessions, loadTenantsRouting, type SessionCipher } from './session-load.js'
export { DEFAULT_NUMBER_POOL, loadNumbers, parseNumberPool, seedNumbers, type NumberRow, type PoolNumber } from './number-pool.js'

const LIVE = sql.fragment`('PENDING','ACTIVE','GRACE_PERIOD')`
const isLive = (s: SessionState) => LIVE_STATES.includes(s)

/** Idempotency keys are kept 24 h per tenant (DECISIONS 4). */
const IDEMPOTENCY_TTL = sql.fragment`interval '24 hours'`

export interface IdempotentReplay {
  requestHash: string
  status: number
  response: unknown
}

export type CreateSessionResult = 'ok' | 'tier-session-limit' | 'proxy-conflict' | { idempotentReplay: IdempotentReplay }

export interface CreateSessionArgs {
  rec: SessionRecord
  metadata: Record<string, unknown>
  agentHash: string
  customerHash: string
  agentEnc: Buffer
  customerEnc: Buffer
  /** The tenant's concurrent-session ceiling (spec 8). */
  quota: number
  events: EventEnvelope[]
  /** The session_created unit price in force, when the caller knows it (looked up otherwise). */
  billing?: { unitPrice: string | null }
  idempotency?: { key: string; requestHash: string; status: number; response: unknown }
}

/**
 * POST /v1/sessions: quota, proxy hold, session row, both participants, outbox events and usage
 * (session_created, and the day's number_rental of the proxy) in ONE statement, atomic on its own.
 * 'tier-session-limit' and 'proxy-conflict' leave nothing behind.
 *
 * Given a pool, the create runs on the plain `pg` path beside slonik's (sql/direct.ts): named and so
 * parsed and planned once per connection, and none of slonik's per-query work (the tag, the
 * interceptors, the result parsers), which was a quarter of the service's CPU per create (issue
 * 13). Without an Idempotency-Key the statement runs alone (no BEGIN/COMMIT): one round trip; with
 * a key, in a transaction after the key's claim. A create that finds another at the database waits
 * for it and goes with all that waited in one batch (createSessionsBatch), which writes them all,
 * keys claimed, or hands each back to run alone. Inside a caller's connection a create runs alone,
 * through slonik, in a savepoint of the caller's transaction.
 */
export async function createSession(db: Db, a: CreateSessionArgs): Promise<CreateSessionResult> {
  const direct = isPool(db) ? directPool(db) : null
  return direct ? batcherOf(db as DatabasePool, direct).submit(a) : createOne(db, null, a)
}

/** One create on its own: the single statement, or with a key its transaction. */
async function createOne(db: Db, direct: DirectPool | null, a: CreateSessionArgs): Promise<CreateSessionResult> {
  try {
    if (direct && !a.idempotency) return await guard(() => withRetry(() => createAlone(db as DatabasePool, direct, a)))
    const keyed = async (tx: Queries): Promise<CreateSessionResult | Rollback<CreateSessionResult>> => {
      if (a.idempotency) {
        const k = a.idempotency
        // A key older than 24 h is free again: the conflicting row is overwritten.
        const claimed = await tx.maybeOneFirst(sql.unsafe`
          INSERT INTO idempotency_keys (tenant_id, key, request_hash, status_code, response, created_at)
          VALUES (${a.rec.tenantId}, ${k.key}, ${k.requestHash}, ${k.status}, ${sql.jsonb(k.response as SerializableValue)}, now())
          ON CONFLICT (tenant_id, key) DO UPDATE
            SET request_hash = EXCLUDED.request_hash, status_code = EXCLUDED.status_code,
                response = EXCLUDED.response, created_at = EXCLUDED.created_at
            WHERE idempotency_keys.created_at < now() - ${IDEMPOTENCY_TTL}
          RETURNING 1`)
        if (claimed === null) {
          const prev = await readIdempotent(tx, a.rec.tenantId, k.key, false)
          if (prev) return rollback({ idempotentReplay: prev })
        }
      }
      const values = createValues(a, direct !== null)
      const run = async () => ((await tx.one({ ...CREATE.token, values })) as CreateRow).outcome
      let out = await run()
      if (out === 'no-period') {
        await ensurePeriod(tx, a.rec.tenantId, a.rec.createdAt)
        out = await run()
      }
      // The statement wrote nothing when it refused, but the key's claim must go too.
      return out === 'ok' ? 'ok' : rollback(out === 'no-period' ? 'proxy-conflict' : out)
    }
    return await (direct ? guard(() => withRetry(() => directTransaction(direct, keyed))) : transact<CreateSessionResult>(db, keyed))
  } catch (err) {
    // A proxy or a participant taken by a concurrent transaction after this statement's
    // snapshot: the statement (or the transaction) was undone as a whole.
    if (raceRefusal(err)) return 'proxy-conflict'
    throw err
  }
}

/**
 * Statements of creates at the database at once, per pool (sql/create-batcher.ts).
 * One: under load every create then waits for at most one statement and goes in the next batch.
 * A statement that waits for a row lock holds up the node's other creates meanwhile; the locks a
 * create meets are held by statements as short as itself (other creates and batches, expiry
 * sweeps, tenant changes), and a create alone also waited for a free connection of the pool.
 * `npm run bench -- --only create --sessions 100000` on a 2-core machine, one slot against two:
 * 1,794 against 1,488 creates/s, 353 against 440 µs of Postgres CPU per create, p99 paced at a
 * quarter of the INSERT loop 25 against 39 ms (four slots: 1,399/s, 536 µs).
 */
const CREATE_SLOTS = 1
/** The most creates in one batch. */
const CREATE_BATCH_MAX = 32

const batchers = new WeakMap<DirectPool, CreateBatcher<CreateSessionArgs, CreateSessionResult>>()

/** How this pool's creates reached the database since start (metrics); null for a pool that does not batch. */
export function createBatchStats(db: Db): Readonly<BatchStats> | null {
  const direct = isPool(db) ? directPool(db) : null
  return direct ? batcherOf(db as DatabasePool, direct).stats : null
}

function batcherOf(db: DatabasePool, direct: DirectPool): CreateBatcher<CreateSessionArgs, CreateSessionResult> {
  let b = batchers.get(direct)
  if (!b) {
    b = new CreateBatcher({
      one: a => createOne(db, direct, a),
      many: batch => createSessionsBatch(direct, batch),
      written: 'ok',
    }, CREATE_SLOTS, CREATE_BATCH_MAX)
    batchers.set(direct, b)
  }
  return b
}

async function createAlone(db: DatabasePool, direct: DirectPool, a: CreateSessionArgs): Promise<CreateSessionResult> {
  const values = createValues(a, true)
  const query = direct.named ? { name: CREATE_NAME, text: CREATE.text, values } : { text: CREATE.text, values }
  const run = async () => {
    try {
      return (await direct.pool.query<CreateRow>(query)).rows[0]!.outcome
    } catch (err) {
      direct.report(err)
      throw err
    }
  }
  let out = await run()
  if (out === 'no-period') {
    // The tenant's first usage this month: open the period (its own short transaction, harmless
    // if the create is then refused), and run the create again.
    await transact(db, tx => ensurePeriod(tx, a.rec.tenantId, a.rec.createdAt))
    out = await run()
    if (out === 'no-period') throw new StoreError('internal', 'no-period')
  }
  return out
}

type CreateOutcome = 'ok' | 'tier-session-limit' | 'proxy-conflict' | 'no-period'
interface CreateRow { outcome: CreateOutcome }

/** The two ways the database refuses a create that its snapshot's gates let through (see CREATE). */
function raceRefusal(err: unknown): boolean {
  const state = sqlStateOf(err)
  return state === '23502' || (err instanceof StoreError && err.slug === 'proxy-conflict')
}

type CreateParam =
  | 'tenant' | 'quota' | 'proxy' | 'id' | 'state' | 'direction' | 'metadata' | 'grace' | 'maxDuration' | 'recording'
  | 'consent' | 'agentEnc' | 'customerEnc' | 'agentHash' | 'customerHash' | 'expiresAt' | 'createdAt' | 'activatedAt'
  | 'endedAt' | 'expiredAt' | 'version' | 'events' | 'periodStart' | 'usageId' | 'priceKnown' | 'price' | 'rentalId'
  | 'rentalKey' | 'rentalMeta' | 'channels' | 'idle'

/** A parameter of CREATE by name: a marker string, replaced by its value at each create. */
const P = (name: CreateParam) => `\u0001${name}`

/**
 * Refusals write nothing, with no transaction to roll back. Read-only gates come first: `clash`
 * (a participant already on this proxy), `hold` (the proxy is free or this tenant's, DECISIONS 4)
 * and `period` (the month's billing period is open), as of the statement's snapshot. They gate q
 * (the quota, spec 8.2, across nodes: the tenant row's update, re-checked on its newest version),
 * q gates p (the proxy hold), p gives s its proxy number, s gates the participants, and those the
 * outbox and the usage. What a concurrent transaction committed after the snapshot is still
 * refused by the database, by undoing the whole statement with an error: a proxy another tenant
 * took leaves p empty and s's proxy_number NULL (23502, NOT NULL), and a participant another
 * create inserted fails the INSERT into session_participants on its primary key (23505, no ON
 * CONFLICT on purpose). Spec 3.1 and the hold stay decided by the database.
 * Lock order: the tenant row (q), then the proxy row (p waits for q: EXISTS over q gates it), then
 * the participant keys: the order releaseSessions and bulkInsertSessions keep (issue 18). Each
 * uncorrelated EXISTS is evaluated in full before the node it gates reads a row. (A tenant row
 * locked FOR UPDATE first and updated after, in one statement, deadlocked: the update of a row
 * version newer than the snapshot queues for the tuple lock behind the waiters of its own lock.)
 */
const CREATE = compile(sql.unsafe`${PREPARE}
  WITH clash AS (
    SELECT 1 FROM session_participants
    WHERE proxy_number = ${P('proxy')}::text AND party_hash IN (${P('agentHash')}::text, ${P('customerHash')}::text) LIMIT 1),
  hold AS (
    SELECT 1 FROM proxy_numbers
    WHERE number = ${P('proxy')}::text AND (tenant_id IS NULL OR tenant_id = ${P('tenant')}::uuid)),
  period AS (
    SELECT id FROM billing_periods WHERE tenant_id = ${P('tenant')}::uuid AND period_start = ${P('periodStart')}::timestamptz),
  q AS (
    UPDATE tenants SET live_sessions = live_sessions + 1
    WHERE id = ${P('tenant')}::uuid AND live_sessions < ${P('quota')}::int
      AND NOT EXISTS (SELECT 1 FROM clash) AND EXISTS (SELECT 1 FROM hold) AND EXISTS (SELECT 1 FROM period)
    RETURNING id),
  p AS (
    UPDATE proxy_numbers
    SET tenant_id = ${P('tenant')}::uuid, last_tenant_id = ${P('tenant')}::uuid, live_sessions = live_sessions + 1, released_at = NULL
    WHERE number = ${P('proxy')}::text AND (tenant_id IS NULL OR tenant_id = ${P('tenant')}::uuid) AND EXISTS (SELECT 1 FROM q)
    RETURNING number),
  s AS (
    INSERT INTO sessions (id, tenant_id, proxy_number, state, direction_mode, metadata, grace_period_minutes,
                          max_duration_minutes, recording_enabled, consent_prompt, agent_phone_enc, customer_phone_enc,
                          agent_hash, customer_hash, expires_at, created_at, activated_at, ended_at, expired_at, version,
                          channels, inactivity_timeout_minutes)
    SELECT ${P('id')}::uuid, ${P('tenant')}::uuid, (SELECT number FROM p), ${P('state')}::text, ${P('direction')}::text,
           ${P('metadata')}::jsonb, ${P('grace')}::int, ${P('maxDuration')}::int, ${P('recording')}::boolean, ${P('consent')}::text,
           ${P('agentEnc')}::bytea, ${P('customerEnc')}::bytea, ${P('agentHash')}::text, ${P('customerHash')}::text,
           ${P('expiresAt')}::timestamptz, ${P('createdAt')}::timestamptz, ${P('activatedAt')}::timestamptz,
           ${P('endedAt')}::timestamptz, ${P('expiredAt')}::timestamptz, ${P('version')}::int,
           ${P('channels')}::smallint, ${P('idle')}::int
    WHERE EXISTS (SELECT 1 FROM q)
    RETURNING id),
  parts AS (
    INSERT INTO session_participants (proxy_number, party_hash, session_id)
    SELECT ${P('proxy')}::text, h.hash, s.id FROM s CROSS JOIN (VALUES (${P('agentHash')}::text), (${P('customerHash')}::text)) AS h(hash)
    RETURNING 1),
  outbox_ins AS (${outboxInsertFrom(sql.fragment`
    SELECT x FROM jsonb_array_elements(${P('events')}::jsonb) AS x WHERE EXISTS (SELECT 1 FROM s)`, P('id'), { fresh: true })}),
  usage_ins AS (
    INSERT INTO billing_events (id, tenant_id, billing_period_id, metric, quantity, unit_price, recorded_at,
                                session_id, call_record_id, metadata, dedupe_key)
    SELECT u.id, ${P('tenant')}::uuid, period.id, u.metric, 1,
           CASE WHEN u.known THEN u.price ELSE (
             SELECT pr.unit_price FROM pricing pr JOIN tenants t ON t.tier = pr.tier
             WHERE t.id = ${P('tenant')}::uuid AND pr.metric = u.metric AND pr.effective_from <= ${P('createdAt')}::timestamptz
               AND (pr.effective_until IS NULL OR pr.effective_until > ${P('createdAt')}::timestamptz)
             ORDER BY pr.effective_from DESC LIMIT 1) END,
           ${P('createdAt')}::timestamptz, u.session_id, NULL, u.metadata, u.dedupe_key
    FROM period CROSS JOIN (VALUES
      (${P('usageId')}::uuid, 'session_created', ${P('priceKnown')}::boolean, ${P('price')}::numeric, ${P('id')}::uuid, '{}'::jsonb, NULL::text),
      (${P('rentalId')}::uuid, 'number_rental', false, NULL::numeric, NULL::uuid, ${P('rentalMeta')}::jsonb, ${P('rentalKey')}::text)
    ) AS u(id, metric, known, price, session_id, metadata, dedupe_key)
    WHERE EXISTS (SELECT 1 FROM parts)
    ON CONFLICT (dedupe_key) DO NOTHING)
  -- One text column (pg builds a parser per column of every result). The quota is decided first
  -- (q before p), also when a read-only gate kept q from running.
  SELECT CASE
    WHEN EXISTS (SELECT 1 FROM s) THEN 'ok'
    WHEN EXISTS (SELECT 1 FROM clash) OR NOT EXISTS (SELECT 1 FROM hold) THEN
      CASE WHEN (SELECT live_sessions < ${P('quota')}::int FROM tenants WHERE id = ${P('tenant')}::uuid) THEN 'proxy-conflict' ELSE 'tier-session-limit' END
    WHEN NOT EXISTS (SELECT 1 FROM period) THEN 'no-period'
    WHEN EXISTS (SELECT 1 FROM q) THEN 'proxy-conflict'
    ELSE 'tier-session-limit' END AS outcome`)

/** Named per connection on real Postgres (parsed and planned once); never on the embedded one. */
const CREATE_NAME = 'ml_create_session_v2'

interface Compiled {
  /** For slonik (a caller's connection, or the keyed path): the token, values set per create. */
  token: QuerySqlToken
  /** For pg: the text with $1… placeholders. */
  text: string
  /** Per placeholder: a parameter of the create, or a constant of the text. */
  slots: readonly (CreateParam | { value: unknown })[]
}

function compile(token: QuerySqlToken): Compiled {
  const slots = token.values.map(v => (typeof v === 'string' && v.startsWith('\u0001') ? (v.slice(1) as CreateParam) : { value: v }))
  return { token, text: token.sql.replaceAll('$slonik_', '$'), slots }
}

/**
 * A create's parameters by name: CREATE's placeholders (createValues) and a row of
 * create_sessions_batch (migration 015, which reads them by these names).
 */
function createParams(a: CreateSessionArgs, bytea: (b: Buffer) => unknown): Record<CreateParam, unknown> {
  const { rec } = a
  return {
    tenant: rec.tenantId, quota: a.quota, proxy: rec.proxyNumber, id: rec.id, state: rec.state, direction: rec.directionMode,
    metadata: a.metadata, grace: rec.gracePeriodMinutes, maxDuration: rec.maxDurationMinutes,
    recording: rec.recordingEnabled, consent: rec.consentPrompt, agentEnc: bytea(a.agentEnc), customerEnc: bytea(a.customerEnc),
    agentHash: a.agentHash, customerHash: a.customerHash, expiresAt: iso(rec.expiresAt), createdAt: iso(rec.createdAt),
    activatedAt: iso(rec.activatedAt), endedAt: isoOrNull(rec.endedAt), expiredAt: isoOrNull(rec.expiredAt), version: rec.version,
    events: a.events, periodStart: iso(monthStart(rec.createdAt)), usageId: uuidv7(),
    priceKnown: a.billing !== undefined, price: a.billing?.unitPrice ?? null, rentalId: uuidv7(),
    rentalKey: numberRentalKey(rec.tenantId, rec.proxyNumber, rec.createdAt), rentalMeta: { proxyNumber: rec.proxyNumber },
    channels: rec.channels ?? ALL_CHANNELS, idle: rec.inactivityTimeoutMinutes ?? null,
  }
}

/** The parameters of CREATE in placeholder order. `pg` takes the bytea as Buffers, slonik as text; jsonb as JSON text. */
function createValues(a: CreateSessionArgs, buffers: boolean): unknown[] {
  const v = createParams(a, b => (buffers ? b : `\\x${b.toString('hex')}`))
  v.metadata = JSON.stringify(v.metadata)
  v.events = JSON.stringify(v.events)
  v.rentalMeta = JSON.stringify(v.rentalMeta)
  return CREATE.slots.map(s => (typeof s === 'string' ? v[s] : s.value))
}

/**
 * Creates that arrive while an earlier one is at the database go together (issue 13): one call of
 * create_sessions_batch (migration 015), which takes the batch's row locks in the order every
 * writer keeps and then writes every create of the batch, or nothing.
 */
const CREATE_BATCH = sql.unsafe`${PREPARE}
  SELECT create_sessions_batch(${'batch'}::jsonb, ${'tenants'}::uuid[], ${'proxies'}::text[]) AS outcome`

/**
 * Writes every create of `batch` (true), or nothing (false: each must then run on its own). Any
 * other error is reported where the pool reports its own (a fault of the connection, or of the
 * function, is then seen even though each create goes on alone) and thrown.
 */
export async function createSessionsBatch(direct: DirectPool, batch: readonly CreateSessionArgs[]): Promise<boolean> {
  const rows = JSON.stringify(batch.map(a => {
    const k = a.idempotency
    const row: Record<string, unknown> = createParams(a, b => b.toString('hex'))
    return k ? Object.assign(row, { idemKey: k.key, idemHash: k.requestHash, idemStatus: k.status, idemResponse: k.response }) : row
  }))
  const tenants = [...new Set(batch.map(a => a.rec.tenantId))]
  const proxies = [...new Set<string>(batch.map(a => a.rec.proxyNumber))]
  try {
    const row = (await direct.queries.one({ sql: CREATE_BATCH.sql, values: [rows, tenants, proxies] })) as { outcome: string }
    return row.outcome === 'ok'
  } catch (err) {
    if (BATCH_UNDONE.has(sqlStateOf(err) ?? '')) return false
    direct.report(err)
    throw err
  }
}

/** How a batch fails when one of its creates may not be written (see create_sessions_batch). */
const BATCH_UNDONE = new Set(['23502', '23505', '21000', '40P01', '40001'])

function isPool(db: Db): db is DatabasePool {
  return typeof (db as DatabasePool).connect === 'function'
}

async function readIdempotent(db: Queries, tenantId: string, key: string, freshOnly: boolean): Promise<IdempotentReplay | null> {
  const row = (await db.maybeOne(sql.unsafe`
    SELECT request_hash, status_code, response FROM idempotency_keys
    WHERE tenant_id = ${tenantId} AND key = ${key}
      ${freshOnly ? sql.fragment`AND created_at >= now() - ${IDEMPOTENCY_TTL}` : sql.fragment``}`)) as
    { request_hash: string; status_code: number; response: unknown } | null
  return row && { requestHash: row.request_hash, status: row.status_code, response: row.response }
}

/** The stored answer of an Idempotency-Key used in the last 24 h, if any. */
export async function findIdempotent(db: Db, tenantId: string, key: string): Promise<IdempotentReplay | null> {
  return guard(() => readIdempotent(db, tenantId, key, true))
}

export interface SwapArgs {
  oldCustomerHash: string
  newCustomerHash: string
  newCustomerEnc: Buffer
}

export interface UpdateSessionArgs {
  prev: SessionRecord
  /** The new state; its `version` is stored (normally prev.version + 1). */
  next: SessionRecord
  /** Shallow merge into metadata (spec 4.2 PATCH). */
  metadataPatch?: Record<string, unknown>
  swap?: SwapArgs
  audit?: { action: string; data: object }
  events: EventEnvelope[]
  /** Issue #16: the inactivity clock restarts here (a PATCH that changed the timeout). */
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
    // No release: one statement, committed on its own (issue 13: a target swap was five statements
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
    await releaseSessions(tx, sql.fragment`gone AS (SELECT id, tenant_id, proxy_number FROM sessions WHERE id = ${prev.id})`)
    return 'ok'
  }
  // Given a pool, on the plain `pg` path with its statements named (sql/direct.ts): an end is five
  // or six statements, and slonik's per-query work and its unnamed statements' parse and plan made
  // each take ~6 ms of the service's time at p50 (issue 13).
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
      SELECT id, proxy_number FROM sessions
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
 * Issue #16: a session's last activity as the store knows it: the start of its inactivity clock
 * (creation, or the PATCH that set the timeout), its last call (its call records, written by
 * whatever node routed it) and its last SMS (one probe of sms_records_session_sent).
 */
function lastActivity(s: FragmentSqlToken) {
  return sql.fragment`GREATEST(COALESCE(${s}.activity_at, ${s}.created_at), ${lastCallAt(s)},
    (SELECT max(sr.sent_at) FROM sms_records sr WHERE sr.session_id = ${s}.id))`
}

/** Issue #16: lastActivity of one session in epoch ms; null when the session is unknown. */
export async function getLastActivity(db: Db, id: string): Promise<number | null> {
  if (!isUuid(id)) return null
  return guard(async () => {
    const at = await db.maybeOneFirst(sql.unsafe`SELECT ${lastActivity(sql.fragment`s`)} FROM sessions s WHERE s.id = ${id}`)
    return at === null ? null : Number(at)
  })
}

/**
 * The bookkeeping of sessions that just left the live states. `goneCtes` defines a CTE `gone`
 * producing (id, tenant_id, proxy_number): their participant rows go (the parties are unwired),
 * the tenants' and proxies' live counters drop, and a proxy whose count reaches 0 is released (no
 * tenant, cooldown starts). Counters never go below 0, so a drift cannot block expiry.
 *
 * Lock order (issue 18: creates and expiry sweeps deadlocked): every statement that moves these
 * counters locks the tenant rows first (by id), then the proxy rows (by number), then touches the
 * participant rows, as createSession does (q, then p, then parts) and bulkInsertSessions (tenants,
 * then proxies). Two statements:
 * 1. The locks. Left to itself Postgres runs a statement's unread CTEs in no promised order and a
 *    multi-row lock in its join's order, so the order is forced: lock_t and lock_p take the row
 *    locks in ORDER BY order, and lock_p starts only once lock_t has counted all its rows (an
 *    uncorrelated scalar subquery is evaluated, in full, before the node it gates reads a row).
 * 2. The writes, in a statement of their own, so with a snapshot taken once every row they change
 *    is held. Written in the locking statement they deadlocked (issue 12, once the outbox's key to
 *    tenants was gone: migration 010): a tenant row updated by another transaction after that
 *    statement's snapshot is locked by lock_t in its newest version, but the UPDATE then meets the
 *    older version of its snapshot and queues for that version's tuple lock behind the transactions
 *    waiting for this one (the hazard createSession's comment describes). The outbox key's check had
 *    hidden it by share-locking the tenant row earlier in the transaction.
 * Callers lock the session rows before this (their own order, by id).
 */
async function releaseSessions(tx: Queries, goneCtes: FragmentSqlToken) {
  await tx.query(sql.unsafe`
    WITH ${goneCtes},
    lock_t AS (
      SELECT count(*) AS n FROM (
        SELECT 1 FROM tenants WHERE id IN (SELECT tenant_id FROM gone) ORDER BY id FOR NO KEY UPDATE) l),
    lock_p AS (
      SELECT count(*) AS n FROM (
        SELECT 1 FROM proxy_numbers WHERE number IN (SELECT proxy_number FROM gone) AND (SELECT n FROM lock_t) >= 0
        ORDER BY number FOR NO KEY UPDATE) l)
    SELECT n FROM lock_p`)
  return tx.any(sql.unsafe`
    WITH ${goneCtes},
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
      FROM (SELECT proxy_number, count(*)::int AS n FROM gone GROUP BY proxy_number) c
      WHERE pn.number = c.proxy_number RETURNING 1)
    SELECT id FROM gone`)
}

const EXPIRE_BATCH = 500

/**
 * Expires sessions (spec 3.1: grace period elapsed, or hard timeout). Only rows still live are
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
        RETURNING s.id, s.tenant_id, s.proxy_number`)) as readonly { id: string; tenant_id: string; proxy_number: string }[]
      if (gone.length === 0) return []
      await releaseSessions(tx, sql.fragment`
        gone AS (
          SELECT * FROM unnest(${sql.array(gone.map(g => g.id), 'uuid')}, ${sql.array(gone.map(g => g.tenant_id), 'uuid')},
                               ${sql.array(gone.map(g => g.proxy_number), 'text')}) AS g(id, tenant_id, proxy_number))`)
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
 * Issue #16: inactivity ends, as POST /end (spec 3.1: GRACE_PERIOD, endedAt, expiresAt = now +
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

/**
 * Issue #16 stickyProxy: the proxy of the newest session this agent and customer had with the
 * tenant created at or after `since`; null when none. One probe of sessions_pair_recent (008).
 */
export async function findStickyProxy(db: Db, q: { tenantId: string; agentHash: string; customerHash: string; since: number }): Promise<string | null> {
  return guard(async () => (await db.maybeOneFirst(sql.unsafe`
    SELECT proxy_number FROM sessions
    WHERE customer_hash = ${q.customerHash} AND agent_hash = ${q.agentHash} AND created_at >= ${ts(q.since)}
      AND tenant_id = ${q.tenantId}
    ORDER BY created_at DESC LIMIT 1`)) as string | null)
}

/** Spec 2.2, as the API returns it: no phone numbers, ISO 8601 times. */
export interface SessionView {
  id: string
  tenantId: string
  proxyNumber: string
  state: SessionState
  directionMode: SessionRecord['directionMode']
  metadata: Record<string, unknown>
  gracePeriodMinutes: number
  maxDurationMinutes: number
  recordingEnabled: boolean
  consentPrompt: SessionRecord['consentPrompt']
  expiresAt: string
  createdAt: string
  activatedAt: string
  endedAt: string | null
  expiredAt: string | null
  callCount: number
  lastCallAt: string | null
  /** Issue #16. */
  channels: Array<'voice' | 'sms'>
  inactivityTimeoutMinutes: number | null
}

const VIEW_COLUMNS = sql.fragment`
  id, tenant_id, proxy_number, state, direction_mode, metadata, grace_period_minutes, max_duration_minutes,
  recording_enabled, consent_prompt, expires_at, created_at, activated_at, ended_at, expired_at, calls.call_count, calls.last_call_at,
  channels, inactivity_timeout_minutes`

interface ViewRow {
  id: string; tenant_id: string; proxy_number: string; state: SessionState; direction_mode: SessionView['directionMode']
  metadata: Record<string, unknown>; grace_period_minutes: number; max_duration_minutes: number; recording_enabled: boolean
  consent_prompt: SessionView['consentPrompt']; expires_at: number; created_at: number; activated_at: number
  ended_at: number | null; expired_at: number | null; call_count: number; last_call_at: number | null
  channels: number; inactivity_timeout_minutes: number | null
}

function toView(r: ViewRow): SessionView {
  return {
    id: r.id,
    tenantId: r.tenant_id,
    proxyNumber: r.proxy_number,
    state: r.state,
    directionMode: r.direction_mode,
    metadata: r.metadata,
    gracePeriodMinutes: r.grace_period_minutes,
    maxDurationMinutes: r.max_duration_minutes,
    recordingEnabled: r.recording_enabled,
    consentPrompt: r.consent_prompt,
    expiresAt: iso(r.expires_at),
    createdAt: iso(r.created_at),
    activatedAt: iso(r.activated_at),
    endedAt: isoOrNull(r.ended_at),
    expiredAt: isoOrNull(r.expired_at),
    callCount: r.call_count,
    lastCallAt: isoOrNull(r.last_call_at),
    channels: channelNames(r.channels),
    inactivityTimeoutMinutes: r.inactivity_timeout_minutes,
  }
}

const VOICE_ONLY: Array<'voice' | 'sms'> = ['voice']
const SMS_ONLY: Array<'voice' | 'sms'> = ['sms']
const BOTH: Array<'voice' | 'sms'> = ['voice', 'sms']

/** Issue #16: channel bits (engine/types.ts Channel) as the API names them; absent: both. */
export function channelNames(bits: number | undefined): Array<'voice' | 'sms'> {
  return bits === 1 ? [...VOICE_ONLY] : bits === 2 ? [...SMS_ONLY] : [...BOTH]
}

export async function getSession(db: Db, tenantId: string, id: string): Promise<SessionView | null> {
  if (!isUuid(id) || !isUuid(tenantId)) return null
  return guard(async () => {
    const row = (await db.maybeOne(sql.unsafe`SELECT ${VIEW_COLUMNS} FROM sessions ${callsJoin()} WHERE id = ${id} AND tenant_id = ${tenantId}`)) as ViewRow | null
    return row && toView(row)
  })
}

/**
 * GET /v1/sessions: newest first. `after` is the opaque cursor this returned (`<createdAt>_<id>`),
 * or a bare ISO timestamp (sessions created strictly before it).
 */
export async function listSessions(db: Db, q: { tenantId: string; state?: SessionState | string | undefined; limit: number; after?: string | undefined }): Promise<'bad-cursor' | { data: SessionView[]; after: string | null }> {
  const cursor = q.after === undefined ? null : decodeTimeCursor(q.after)
  if (q.after !== undefined && !cursor) return 'bad-cursor'
  return guard(async () => {
    const rows = (await db.any(sql.unsafe`
      SELECT ${VIEW_COLUMNS} FROM sessions ${callsJoin()}
      WHERE tenant_id = ${q.tenantId}
        ${q.state ? sql.fragment`AND state = ${q.state}` : sql.fragment``}
        ${cursor ? (cursor.id ? sql.fragment`AND (created_at, id) < (${ts(cursor.ms)}, ${cursor.id}::uuid)` : sql.fragment`AND created_at < ${ts(cursor.ms)}`) : sql.fragment``}
      ORDER BY created_at DESC, id DESC
      LIMIT ${q.limit + 1}`)) as readonly ViewRow[]
    const page = rows.slice(0, q.limit)
    const last = page[page.length - 1]
    return { data: page.map(toView), after: rows.length > q.limit && last ? encodeTimeCursor(last.created_at, last.id) : null }
  })
}

/** GET /v1/sessions/verify: the newest ACTIVE or GRACE_PERIOD session the party takes part in. */
export async function findLiveByPartyHash(db: Db, tenantId: string, hash: string): Promise<{ id: string; proxyNumber: string; metadata: Record<string, unknown> } | null> {
  return guard(async () => {
    const row = (await db.maybeOne(sql.unsafe`
      SELECT id, proxy_number, metadata FROM sessions
      WHERE tenant_id = ${tenantId} AND (agent_hash = ${hash} OR customer_hash = ${hash})
        AND state IN ${LIVE} AND state <> 'PENDING'
      ORDER BY created_at DESC, id DESC
      LIMIT 1`)) as { id: string; proxy_number: string; metadata: Record<string, unknown> } | null
    return row && { id: row.id, proxyNumber: row.proxy_number, metadata: row.metadata }
  })
}
