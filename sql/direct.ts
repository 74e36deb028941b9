// The plain `pg` path for the store's hot statements: the session create and the
// record writer's batches. slonik sends every query as an unnamed statement, so Postgres parses
// and plans it on each execution (for the ten-CTE create, 0.75 ms of parse and 1.3 ms of planning,
// nearly all of Postgres's CPU per create), and its per-query work (the tag, interceptors, result
// parsers) was a quarter of the service's CPU per create. Here a statement whose text starts with
// PREPARE runs as a named statement, parsed once per connection with its plan cached by Postgres;
// everything else runs as is. No prototype is touched: only statements sent through this module
// are named, on connections of its own pool.
//
// Statements are slonik tokens (the `sql` tag), so the same text serves both paths; values come
// back as through slonik's pools (sql/pg-types.ts). Not named on the embedded server, where every
// connection shares one PGlite backend that would keep each closed connection's statements.
import { createHash } from 'node:crypto'
import type { EventEmitter } from 'node:events'
import pg from 'pg'
import { sql, type DatabasePool } from 'slonik'
import { staleStatement, StoreError } from './errors.js'
import { PG_TYPES } from './pg-types.js'
import { Rollback } from './transaction.js'

const MARK = '/* prepared */'
/** Put first in a statement's text to have it prepared once per connection on the direct path. */
export const PREPARE = sql.fragment`/* prepared */`
/** application_name of the embedded server's connections: statements stay unnamed there. */
export const UNPREPARED_APPLICATION = 'maskline-embedded'
/** Distinct marked texts named; past this a statement goes unnamed (a bug, not a workload). */
export const MAX_TEXTS = 256

/** A statement as the `sql` tag builds it: slonik's placeholders and its values. */
export interface Statement { readonly sql: string; readonly values: readonly unknown[] }

/**
 * The query methods of slonik's CommonQueryMethods that the record writer's statements use, with
 * slonik's meaning (`one` refuses zero or several rows). slonik connections and transactions
 * satisfy it as they are; DirectQueries implements it over a plain `pg` pool or client.
 */
export interface Queries {
  any(q: Statement): Promise<readonly any[]>
  anyFirst(q: Statement): Promise<readonly any[]>
  one(q: Statement): Promise<any>
  maybeOne(q: Statement): Promise<any>
  maybeOneFirst(q: Statement): Promise<any>
  oneFirst(q: Statement): Promise<any>
  query(q: Statement): Promise<{ readonly rows: readonly any[]; readonly rowCount: number | null }>
}

const names = new Map<string, string>()

function nameOf(text: string): string | undefined {
  let name = names.get(text)
  if (name === undefined && names.size < MAX_TEXTS) {
    // A name stands for one text, so any connection may use it: pg tracks per connection which
    // names it has parsed there.
    name = `ml_${createHash('sha256').update(text).digest('hex').slice(0, 20)}`
    names.set(text, name)
  }
  return name
}

const texts = new Map<string, string>()

/** How many statement names and converted texts are cached (docs/memory-bounds.md). */
export function statementCacheSizes(): { names: number; texts: number } {
  return { names: names.size, texts: texts.size }
}

/** slonik's `$slonik_N` placeholders as Postgres's `$N` (cached: the hot texts repeat). */
function textOf(q: Statement): string {
  let text = texts.get(q.sql)
  if (text === undefined) {
    text = q.sql.replaceAll('$slonik_', '$')
    if (texts.size < MAX_TEXTS * 4) texts.set(q.sql, text)
  }
  return text
}

/** The config pg runs for a statement: named when marked and allowed, our value parsers always. */
export function queryConfig(q: Statement, named: boolean, values: readonly unknown[] = q.values): pg.QueryConfig {
  const text = textOf(q)
  const name = named && text.startsWith(MARK) ? nameOf(text) : undefined
  return { text, values: values as unknown[], types: PG_TYPES, ...(name ? { name } : {}) }
}

/** As slonik's NotFoundError (no row) and DataIntegrityError (several), already as the store says them. */
function rowCountError(found: number): StoreError {
  return found === 0 ? new StoreError('not-found', 'no-rows') : new StoreError('internal', 'several-rows')
}

/** Queries over a plain `pg` pool (each statement on any connection) or one checked-out client. */
export class DirectQueries implements Queries {
  readonly #on: pg.Pool | pg.PoolClient
  readonly #named: boolean

  constructor(on: pg.Pool | pg.PoolClient, named: boolean) {
    this.#on = on
    this.#named = named
  }

  async query(q: Statement): Promise<pg.QueryResult> {
    return this.#on.query(queryConfig(q, this.#named))
  }

  async any(q: Statement): Promise<readonly any[]> {
    return (await this.query(q)).rows
  }

  async anyFirst(q: Statement): Promise<readonly any[]> {
    const r = await this.query(q)
    const col = r.fields[0]?.name
    return col === undefined ? [] : r.rows.map(row => row[col])
  }

  async maybeOne(q: Statement): Promise<any> {
    const rows = (await this.query(q)).rows
    if (rows.length > 1) throw rowCountError(rows.length)
    return rows[0] ?? null
  }

  async one(q: Statement): Promise<any> {
    const row = await this.maybeOne(q)
    if (row === null) throw rowCountError(0)
    return row
  }

  async maybeOneFirst(q: Statement): Promise<any> {
    const r = await this.query(q)
    if (r.rows.length > 1) throw rowCountError(r.rows.length)
    const col = r.fields[0]?.name
    return r.rows.length === 0 || col === undefined ? null : r.rows[0][col]
  }

  async oneFirst(q: Statement): Promise<any> {
    const v = await this.maybeOneFirst(q)
    if (v === null) throw rowCountError(0)
    return v
  }
}

export interface DirectPool {
  pool: pg.Pool
  /** False on the embedded server (see the header). */
  named: boolean
  /** Queries on the pool: each statement on any free connection, atomic on its own. */
  queries: DirectQueries
  /** Connection trouble, reported where slonik reports its own (the slonik pool's 'error'). */
  report: (err: unknown) => void
}

const directPools = new WeakMap<DatabasePool, DirectPool | null>()

/**
 * A plain `pg` pool on the same database as a slonik pool, made on first use and ended with it;
 * null when the slonik pool does not say where it connects. Its connections are idle-timed and do
 * not keep the process alive; no session state is set on them but the statement timeout slonik's
 * pool has (real Postgres only: the embedded backend is shared). A connection that breaks is
 * dropped by pg.Pool, and its query fails to the caller as through slonik.
 */
export function directPool(db: DatabasePool): DirectPool | null {
  let d = directPools.get(db)
  if (d !== undefined) return d
  const cfg = (db as { configuration?: { connectionUri?: string; maximumPoolSize?: number } }).configuration
  const uri = cfg?.connectionUri
  if (!uri) {
    directPools.set(db, null)
    return null
  }
  const embedded = uri.includes(`application_name=${UNPREPARED_APPLICATION}`)
  const pool = new pg.Pool({
    connectionString: uri,
    max: cfg.maximumPoolSize ?? 10,
    idleTimeoutMillis: 10_000,
    connectionTimeoutMillis: 5_000,
    allowExitOnIdle: true,
    keepAlive: true,
    ...(embedded ? {} : { statement_timeout: 60_000 }),
  })
  // Errors go where slonik puts its own: re-emitted on the slonik pool, whose listener (sql/db.ts)
  // reports connection trouble by code.
  const events = db as unknown as EventEmitter
  const report = (err: unknown) => {
    if (events.listenerCount('error') > 0) events.emit('error', err)
  }
  pool.on('error', report)
  // Ended with the slonik pool: its owner (sql/db.ts close(), a test) knows only that one. Only
  // this pool object's own `end` is wrapped.
  const end = db.end.bind(db)
  ;(db as { end: () => Promise<void> }).end = async () => {
    directPools.set(db, null)
    await Promise.allSettled([pool.end()])
    await end()
  }
  d = { pool, named: !embedded, queries: new DirectQueries(pool, !embedded), report }
  directPools.set(db, d)
  return d
}

/**
 * `fn` in a transaction on one connection of the direct pool: COMMIT when it returns a value,
 * ROLLBACK when it returns `rollback(value)` (the value is returned) or throws (the error goes on),
 * as transact() does on slonik's pool. A connection whose ROLLBACK fails, or whose named
 * statements a migration made stale (staleStatement), is destroyed, not reused.
 * No retry here: the caller decides (withRetry, or the record writer's own backoff).
 */
export async function directTransaction<T>(d: DirectPool, fn: (q: DirectQueries) => Promise<T | Rollback<T>>): Promise<T> {
  let client: pg.PoolClient
  try {
    client = await d.pool.connect()
  } catch (err) {
    d.report(err)
    throw err
  }
  // A checked-out client that breaks emits 'error' on itself: without a listener, pg would crash
  // the process (a Postgres restart mid-transaction).
  client.on('error', d.report)
  let broken: unknown
  try {
    await client.query('BEGIN')
    const out = await fn(new DirectQueries(client, d.named))
    if (out instanceof Rollback) {
      await client.query('ROLLBACK')
      return out.value
    }
    await client.query('COMMIT')
    return out
  } catch (err) {
    await client.query('ROLLBACK').catch((e: unknown) => { broken = e })
    // Its named statements are stale (a migration changed what one returns): a new connection
    // parses them afresh. (pool.query drops a connection on any error already.)
    if (staleStatement(err)) broken ??= err
    throw err
  } finally {
    client.off('error', d.report)
    client.release(broken instanceof Error ? broken : undefined)
  }
}
