// One transaction helper for the store. Expected outcomes that must undo earlier statements
// (quota reached, proxy taken, stale version) return `rollback(value)` instead of throwing:
// slonik destroys a pooled connection whenever an error escapes it, and these outcomes are
// routine under load. Retries of serialization failures and deadlocks happen here, around the
// whole transaction, only when the store owns it (given a pool, not a caller's connection).
import { sql, type CommonQueryMethods, type DatabasePool } from 'slonik'
import { guard, withRetry } from './errors.js'
import { MasklineError } from '../engine/errors.js'
import { isoTime } from './vocabulary/iso-time.js'

/** A pool, or a connection the caller already holds (possibly inside its own transaction). */
export type Db = DatabasePool | CommonQueryMethods

/** What rollback() returns: undo the transaction, answer `value` (transact, directTransaction). */
export class Rollback<T> {
  readonly value: T
  constructor(value: T) {
    this.value = value
  }
}

export function rollback<T>(value: T): Rollback<T> {
  return new Rollback(value)
}

class RollbackSignal extends MasklineError {
  readonly value: unknown
  constructor(value: unknown) {
    super('ML_ERR_ROLLBACK', 'rollback')
    this.value = value
  }
}

function isPool(db: Db): db is DatabasePool {
  return typeof (db as DatabasePool).connect === 'function'
}

/**
 * Runs `fn` in a transaction (a savepoint when `db` is already in one) and maps failures to
 * StoreError. `fn` may run more than once: it must not have effects outside the database.
 */
export function transact<T>(db: Db, fn: (tx: CommonQueryMethods) => Promise<T | Rollback<T>>): Promise<T> {
  const run = async (c: CommonQueryMethods): Promise<T> => {
    try {
      return await c.transaction(async tx => {
        const out = await fn(tx)
        if (out instanceof Rollback) throw new RollbackSignal(out.value)
        return out
      }, 0)
    } catch (err) {
      if (err instanceof RollbackSignal) return err.value as T
      throw err
    }
  }
  return guard(() => (isPool(db) ? withRetry(() => db.connect(run)) : run(db)))
}

/**
 * A jsonb parameter from plain data that sql/ built itself (strings, numbers, booleans, null; no
 * cycles, no BigInt). JSON.stringify is several times faster than the safe-stable-stringify behind
 * sql.jsonb, which was 5 % of the service's CPU per routed call in the voice bench (the batch rows).
 */
export function jsonb(v: unknown) {
  return sql.fragment`${JSON.stringify(v)}::jsonb`
}

/**
 * The text of a Postgres array literal (`{"a","b",NULL}`), for a parameter cast to a typed array:
 * `unnest($1::uuid[], $2::text[], …)` inserts a batch with less Postgres CPU than
 * jsonb_to_recordset of one jsonb parameter (~1.5 µs a call row: bench/RESULTS.md, "What moved
 * the figures", 0ea0e49). Strings are always quoted, `"` and `\` escaped; null is NULL; numbers and booleans bare.
 */
export function arrayLiteral(values: ReadonlyArray<string | number | boolean | null>): string {
  let out = '{'
  for (let i = 0; i < values.length; i++) {
    const v = values[i]!
    if (i > 0) out += ','
    if (v === null) out += 'NULL'
    else if (typeof v !== 'string') out += String(v)
    else out += `"${NEEDS_ESCAPE.test(v) ? v.replace(ESCAPED, '\\$&') : v}"`
  }
  return out + '}'
}
const NEEDS_ESCAPE = /["\\]/
const ESCAPED = /["\\]/g

/** ISO timestamp literal for epoch ms, cast on the server (exact, independent of time zones). */
export function ts(ms: number) {
  return sql.fragment`${isoTime(ms)}::timestamptz`
}

export function tsOrNull(ms: number | null | undefined) {
  return ms === null || ms === undefined ? sql.fragment`NULL::timestamptz` : ts(ms)
}

export const iso = isoTime
export const isoOrNull = (ms: number | null): string | null => (ms === null ? null : iso(ms))
