// The one place that turns Postgres/driver failures into our slugs (style 4). Callers get a
// StoreError carrying a slug, the SQLSTATE and the constraint name: never the driver's message,
// which can quote row values (party hashes, ids) and, for connection failures, host names.
import { setTimeout as delay } from 'node:timers/promises'
import { MasklineError } from '../engine/errors.js'

/**
 * - conflict: a unique key is taken (contract 7: 409 conflict).
 * - proxy-conflict: internal signal, the participant-overlap rule (contract 3.1) refused the row;
 *   the session runner tries another proxy or answers target-conflict.
 * - not-found: a referenced row does not exist (foreign key) or a required row is missing.
 * - validation: the database refused a value (check constraint, bad input syntax).
 * - retryable: serialization failure or deadlock, or a prepared statement a migration made stale
 *   (staleStatement); safe to run the whole transaction again.
 * - unavailable: the database cannot be reached or ended the connection; transient.
 * - internal: anything else.
 */
export type StoreErrorSlug =
  | 'conflict' | 'proxy-conflict' | 'not-found' | 'validation' | 'retryable' | 'unavailable' | 'internal'

/** `code`: the SQLSTATE (e.g. '23505'), a Node errno code (e.g. 'ECONNREFUSED') or a short word. */
export class StoreError extends MasklineError {
  readonly slug: StoreErrorSlug
  readonly constraint: string | null

  constructor(slug: StoreErrorSlug, code: string, constraint: string | null = null) {
    super(code, `store: ${slug} (${code}${constraint ? ` on ${constraint}` : ''})`)
    this.slug = slug
    this.constraint = constraint
  }

  get retryable(): boolean {
    return this.slug === 'retryable'
  }
}

// Unique violations on these constraints mean something more specific than 'conflict'.
const UNIQUE_SLUGS: Readonly<Record<string, StoreErrorSlug>> = {
  // contract 3.1: never two live sessions sharing a participant on one proxy.
  session_participants_pkey: 'proxy-conflict',
}

const SQLSTATE = /^[0-9A-Z]{5}$/
const ERRNO = /^E[A-Z]+$/

interface MaybeDriverError { code?: unknown; constraint?: unknown; cause?: unknown; name?: unknown; routine?: unknown }

/** The first non-null `pick` of an error or of its causes (slonik wraps pg errors in `cause`), at most five deep. */
function fromChain<T>(err: unknown, pick: (e: MaybeDriverError) => T | null): T | null {
  for (let e = err as MaybeDriverError | undefined, i = 0; e && typeof e === 'object' && i < 5; e = e.cause as MaybeDriverError, i++) {
    const found = pick(e)
    if (found !== null) return found
  }
  return null
}

/**
 * A named statement whose result columns changed type since it was prepared on this connection
 * (SQLSTATE 0A000 "cached plan must not change result type", raised by Postgres's plan cache: a
 * migration altered a column it returns, e.g. its collation). It fails on that connection until the
 * connection is gone, so sql/direct.ts drops the connection and the caller runs the transaction
 * again on a fresh one (retryable): the record writer would otherwise refuse, and drop, every
 * batch of a node that was running when the migration committed.
 */
export function staleStatement(err: unknown): boolean {
  return fromChain(err, e => (e.code === '0A000' && e.routine === 'RevalidateCachedQuery' ? true : null)) ?? false
}

/** The SQLSTATE of an error or of its causes. */
export function sqlStateOf(err: unknown): string | null {
  return fromChain(err, e => (typeof e.code === 'string' && SQLSTATE.test(e.code) ? e.code : null))
}

function constraintOf(err: unknown): string | null {
  return fromChain(err, e => (typeof e.constraint === 'string' && e.constraint ? e.constraint : null))
}

function errnoOf(err: unknown): string | null {
  return fromChain(err, e => (typeof e.code === 'string' && ERRNO.test(e.code) ? e.code : null))
}

// slonik error classes that carry no SQLSTATE, by constructor name (the classes are not all
// exported in a way that survives bundling, and the name is stable API).
const SLONIK_NAMES: Readonly<Record<string, [StoreErrorSlug, string]>> = {
  BackendTerminatedError: ['unavailable', 'backend-terminated'],
  BackendTerminatedUnexpectedlyError: ['unavailable', 'backend-terminated'],
  ConnectionError: ['unavailable', 'connection'],
  StatementTimeoutError: ['unavailable', 'statement-timeout'],
  StatementCancelledError: ['unavailable', 'statement-cancelled'],
  IdleTransactionTimeoutError: ['unavailable', 'idle-transaction-timeout'],
  NotFoundError: ['not-found', 'no-rows'],
  InvalidInputError: ['validation', 'invalid-input'],
}

function slugOfSqlState(state: string, constraint: string | null): StoreErrorSlug {
  if (state === '23505') return (constraint && UNIQUE_SLUGS[constraint]) || 'conflict'
  if (state === '23503') return 'not-found'
  if (state === '40001' || state === '40P01') return 'retryable'
  if (state.startsWith('22') || state === '23502' || state === '23514' || state === '23P01') return 'validation'
  if (state.startsWith('08') || state.startsWith('53') || state.startsWith('57')) return 'unavailable'
  return 'internal'
}

/** Maps anything thrown by slonik/pg (or already a StoreError) to a StoreError. */
export function toStoreError(err: unknown): StoreError {
  if (err instanceof StoreError) return err
  const state = sqlStateOf(err)
  if (state) {
    const constraint = constraintOf(err)
    return new StoreError(staleStatement(err) ? 'retryable' : slugOfSqlState(state, constraint), state, constraint)
  }
  const named = SLONIK_NAMES[(err as { constructor?: { name?: string } })?.constructor?.name ?? '']
  if (named) return new StoreError(named[0], named[1])
  const errno = errnoOf(err)
  if (errno) return new StoreError('unavailable', errno)
  const message = err instanceof Error ? err.message.toLowerCase() : ''
  // pg's own wording for a socket that went away (no code attached).
  if (message.includes('connection terminated') || message.includes('not queryable') || message.includes('connection pool')) {
    return new StoreError('unavailable', 'connection')
  }
  return new StoreError('internal', 'unknown')
}

/** The short code to log for an error (never its message). */
export function errorCode(err: unknown): string {
  return toStoreError(err).code
}

/** Runs `fn`, rethrowing any failure as a StoreError. */
export async function guard<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn()
  } catch (err) {
    throw toStoreError(err)
  }
}

/**
 * Bounded retry of a whole unit of work on serialization failures and deadlocks (40001, 40P01).
 * `fn` must be safe to run again from the start: a transaction that was rolled back.
 */
export async function withRetry<T>(fn: () => Promise<T>, opts: { attempts?: number; baseDelayMs?: number } = {}): Promise<T> {
  const attempts = Math.max(1, opts.attempts ?? 4)
  const base = opts.baseDelayMs ?? 5
  for (let i = 1; ; i++) {
    try {
      return await fn()
    } catch (err) {
      const e = toStoreError(err)
      if (!e.retryable || i >= attempts) throw e
      // Full jitter: two nodes that deadlocked must not collide again in lock step.
      await delay(Math.random() * base * 2 ** i)
    }
  }
}
