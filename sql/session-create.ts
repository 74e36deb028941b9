// POST /v1/sessions in the store: the create, alone or batched, and its Idempotency-Key. The
// statement itself is in sql/session-create-sql.ts.
import { sql, type DatabasePool, type SerializableValue } from 'slonik'
import type { EventEnvelope } from './vocabulary/event-envelope.js'
import { type SessionRecord } from '../engine/types.js'
import { ensurePeriod } from './billing.js'
import { guard, StoreError, withRetry } from './errors.js'
import { CreateBatcher, type BatchStats } from './create-batcher.js'
import { directPool, directTransaction, type DirectPool, type Queries } from './direct.js'
import { rollback, transact, type Db, type Rollback } from './transaction.js'
import { isPool } from './session-common.js'
import { CREATE, CREATE_NAME, createSessionsBatch, createValues, raceRefusal, type CreateRow } from './session-create-sql.js'

/** Idempotency keys are kept 24 h per tenant (contract D4). */
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
  /** The tenant's concurrent-session ceiling (contract 8). */
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
