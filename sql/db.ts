// Opens the database: a real Postgres (DATABASE_URL) or an embedded PGlite in DATA_DIR served on
// 127.0.0.1 (sql/pglite-server.ts). Both are driven by the same slonik pool configuration, so
// every query in sql/ runs the same way on both backends.
//
// Values as they come back (the type parsers below, for every query through these pools):
//   timestamptz, timestamp -> epoch milliseconds (number; sub-millisecond digits are dropped)
//   int8 (count(*), bigint) -> number (our int8 values are counts and epoch ms, far below 2^53)
//   numeric                 -> string, exact (money and billing quantities are never floats)
//   date                    -> 'YYYY-MM-DD' string
//   bytea -> Buffer, json/jsonb -> parsed value, int4 -> number (pg defaults)
//
// Connection strings are never logged: they may carry passwords.
import { existsSync, mkdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { createPool, type ClientConfigurationInput, type DatabasePool, type DriverTypeParser } from 'slonik'
import { toStoreError } from './errors.js'
import { serveEmbedded } from './pglite-server.js'
import { installPreparedStatements, UNPREPARED_APPLICATION } from './prepared.js'

export interface Database {
  pool: DatabasePool
  kind: 'postgres' | 'embedded'
  /** Another pool on the same database (concurrency tests, tools). Ended by close(). */
  createPool(opts?: { maximumPoolSize?: number }): Promise<DatabasePool>
  close(): Promise<void>
}

export interface OpenDatabaseOptions {
  databaseUrl?: string
  dataDir: string
  /** Infrastructure failures (lost connections, timeouts), by code; never a message. */
  onError?: (code: string) => void
  maximumPoolSize?: number
  /**
   * Embedded only: a PGlite data directory dump (PGlite dumpDataDir) to start from when DATA_DIR
   * holds no database yet, instead of running initdb (tests start from a migrated template).
   */
  embeddedSeed?: Blob
}

const TS = /^(\d{4,})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:\.(\d+))?(?:([+-])(\d\d)(?::?(\d\d))?(?::?(\d\d))?)?( BC)?$/

/** Postgres timestamp text (any DateStyle ISO output, any session time zone) to epoch ms. */
export function parseTimestampMs(text: string): number {
  if (text === 'infinity') return Number.POSITIVE_INFINITY
  if (text === '-infinity') return Number.NEGATIVE_INFINITY
  const m = TS.exec(text)
  if (!m) throw new Error('unrecognised timestamp format')
  let year = Number(m[1])
  if (m[12]) year = 1 - year
  const d = new Date(0)
  d.setUTCFullYear(year, Number(m[2]) - 1, Number(m[3]))
  d.setUTCHours(Number(m[4]), Number(m[5]), Number(m[6]), m[7] ? Number(m[7].slice(0, 3).padEnd(3, '0')) : 0)
  let ms = d.getTime()
  if (m[8]) {
    const offset = (Number(m[9]) * 3600 + Number(m[10] ?? 0) * 60 + Number(m[11] ?? 0)) * 1000
    ms -= m[8] === '+' ? offset : -offset
  }
  return ms
}

const TYPE_PARSERS: readonly DriverTypeParser[] = [
  { name: 'timestamptz', parse: parseTimestampMs },
  { name: 'timestamp', parse: parseTimestampMs },
  { name: 'int8', parse: (v: string) => Number(v) },
  { name: 'numeric', parse: (v: string) => v },
  { name: 'date', parse: (v: string) => v },
]

function poolConfig(kind: Database['kind'], maximumPoolSize: number): ClientConfigurationInput {
  return {
    typeParsers: TYPE_PARSERS,
    maximumPoolSize,
    captureStackTrace: false,
    connectionTimeout: 5_000,
    // Nothing in sql/ sets session state, so the default DISCARD ALL per release is a wasted
    // round trip; a connection that fails mid-transaction is destroyed by slonik, not reused.
    resetConnection: async () => {},
    idleTimeout: 10_000,
    // PGlite is a single backend shared by every connection: a server-side timeout would end it
    // for all of them. The embedded server enforces its own idle-in-transaction cut instead.
    statementTimeout: kind === 'embedded' ? 'DISABLE_TIMEOUT' : 60_000,
    idleInTransactionSessionTimeout: kind === 'embedded' ? 'DISABLE_TIMEOUT' : 60_000,
  }
}

async function makePool(uri: string, kind: Database['kind'], size: number, onError: (code: string) => void): Promise<DatabasePool> {
  const pool = await createPool(uri, poolConfig(kind, size))
  // slonik re-emits query errors on the pool. Without a listener that is harmless, but the
  // listener is where connection-level trouble becomes visible; expected outcomes (conflicts,
  // retryable aborts) are reported by their callers, not here.
  pool.on('error', err => {
    const e = toStoreError(err)
    if (e.slug === 'unavailable' || e.slug === 'internal') onError(e.code)
  })
  return pool
}

export async function openDatabase(opts: OpenDatabaseOptions): Promise<Database> {
  installPreparedStatements()
  const onError = opts.onError ?? (() => {})
  if (opts.databaseUrl) {
    const uri = opts.databaseUrl
    const extra: DatabasePool[] = []
    const pool = await makePool(uri, 'postgres', opts.maximumPoolSize ?? 10, onError).catch(err => {
      // pg's connect errors can name the host and user; say only what kind of failure it was.
      throw new Error(`cannot connect to DATABASE_URL (${toStoreError(err).code})`)
    })
    return {
      pool,
      kind: 'postgres',
      async createPool(o = {}) {
        const p = await makePool(uri, 'postgres', o.maximumPoolSize ?? 10, onError)
        extra.push(p)
        return p
      },
      async close() {
        await Promise.allSettled([...extra, pool].map(p => p.end()))
      },
    }
  }
  return openEmbedded(opts.dataDir, opts.maximumPoolSize ?? 4, onError, opts.embeddedSeed)
}

async function openEmbedded(dataDir: string, size: number, onError: (code: string) => void, seed: Blob | undefined): Promise<Database> {
  mkdirSync(dataDir, { recursive: true })
  const unlock = lockDataDir(dataDir)
  try {
    const { PGlite } = await import('@electric-sql/pglite')
    const pgDir = join(dataDir, 'pg')
    const fresh = !existsSync(join(pgDir, 'PG_VERSION'))
    const pg = await PGlite.create(pgDir, seed && fresh ? { loadDataDir: seed } : {})
    const server = await serveEmbedded(pg, { onError })
    const uri = `postgres://postgres@${server.host}:${server.port}/postgres?application_name=${UNPREPARED_APPLICATION}`
    const pools: DatabasePool[] = []
    let pool: DatabasePool
    try {
      pool = await makePool(uri, 'embedded', size, onError)
    } catch (err) {
      await server.close()
      await pg.close()
      throw err
    }
    pools.push(pool)
    let closed: Promise<void> | null = null
    return {
      pool,
      kind: 'embedded',
      async createPool(o = {}) {
        const p = await makePool(uri, 'embedded', o.maximumPoolSize ?? size, onError)
        pools.push(p)
        return p
      },
      close() {
        closed ??= (async () => {
          await Promise.allSettled(pools.map(p => p.end()))
          await server.close()
          await pg.close()
          unlock()
        })()
        return closed
      },
    }
  } catch (err) {
    unlock()
    throw err
  }
}

/** One process per DATA_DIR: two PGlite instances on the same files would corrupt them. */
function lockDataDir(dataDir: string): () => void {
  const path = join(dataDir, 'pg.lock')
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      writeFileSync(path, String(process.pid), { flag: 'wx' })
      return () => {
        try { unlinkSync(path) } catch { /* already gone */ }
      }
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
      const pid = Number(readFileSync(path, 'utf8').trim())
      if (Number.isInteger(pid) && pid > 0 && isAlive(pid)) {
        throw new Error(`DATA_DIR is in use by process ${pid}: embedded Postgres allows one process per directory`, { cause: err })
      }
      unlinkSync(path) // left behind by a process that is gone
    }
  }
  throw new Error('cannot lock DATA_DIR')
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'
  }
}
