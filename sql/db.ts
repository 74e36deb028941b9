// Opens the database: a real Postgres (DATABASE_URL) or an embedded PGlite in DATA_DIR served on
// 127.0.0.1 (sql/pglite-server.ts). Both are driven by the same slonik pool configuration, so
// every query in sql/ runs the same way on both backends.
//
// Values come back as sql/pg-types.ts says (epoch ms for timestamps, numbers for int8, exact
// strings for numeric), through these pools and the plain `pg` path of sql/direct.ts alike.
//
// Connection strings are never logged: they may carry passwords.
import { existsSync, mkdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { createPool, type ClientConfigurationInput, type DatabasePool } from 'slonik'
import { toStoreError } from './errors.js'
import { serveEmbedded } from './pglite-server.js'
import { UNPREPARED_APPLICATION } from './direct.js'
import { TYPE_PARSERS } from './pg-types.js'

export { parseTimestampMs } from './pg-types.js'

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

/**
 * The embedded server's buffer pool. PGlite runs in this process, so its pool is resident memory
 * beside the engine's: Postgres's default 128MB filled up during the boot's scan of the sessions
 * (TID range scans take no ring buffer) and held a million-session node at 1,049-1,085 MiB RSS
 * against a 1 GB bar, where 16MB gives 930-937 MiB (bench/RESULTS.md, "What moved the figures", 750539a). A page
 * missing from the pool is read from DATA_DIR's files, which the kernel's page cache keeps,
 * outside the process.
 */
export const EMBEDDED_SHARED_BUFFERS = '16MB'

async function openEmbedded(dataDir: string, size: number, onError: (code: string) => void, seed: Blob | undefined): Promise<Database> {
  mkdirSync(dataDir, { recursive: true })
  const unlock = lockDataDir(dataDir)
  try {
    const { PGlite } = await import('@electric-sql/pglite')
    const pgDir = join(dataDir, 'pg')
    const fresh = !existsSync(join(pgDir, 'PG_VERSION'))
    const pg = await PGlite.create(pgDir, {
      ...(seed && fresh ? { loadDataDir: seed } : {}),
      startParams: [...PGlite.defaultStartParams, '-c', `shared_buffers=${EMBEDDED_SHARED_BUFFERS}`],
    })
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
