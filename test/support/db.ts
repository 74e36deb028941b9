// A fresh, migrated database per test file (style 7).
// - TEST_DATABASE_URL set (e.g. postgres://postgres@127.0.0.1:5432/test): the migrations are
//   applied once into a template database named after a hash of the migration files, built under
//   an advisory lock (parallel test files wait for the first); each test file then gets
//   `CREATE DATABASE … TEMPLATE` (milliseconds) and drops it in teardown.
// - unset or empty: an embedded PGlite in a fresh temp directory, opened through openDatabase,
//   so the socket server and the very same slonik code are exercised.
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, renameSync, rmSync, statSync, unlinkSync, writeFileSync } from 'node:fs'
import { setTimeout as delay } from 'node:timers/promises'
import { PGlite } from '@electric-sql/pglite'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'
import { createPool, sql, type CommonQueryMethods, type DatabasePool } from 'slonik'
import { openDatabase, type Database } from '../../sql/db.js'
import { migrate, migrationsChecksum } from '../../sql/migrate.js'
import { serveEmbedded } from '../../sql/pglite-server.js'

interface Teardown {
  teardown(fn: () => unknown): void
}

const TEMPLATE_LOCK = 7_202_504_301_118

export function testDatabaseUrl(): string | null {
  return process.env.TEST_DATABASE_URL || null
}

function withDatabase(url: string, name: string): string {
  const u = new URL(url)
  u.pathname = `/${name}`
  return u.toString()
}

async function adminPool(url: string): Promise<DatabasePool> {
  return createPool(url, { maximumPoolSize: 1, captureStackTrace: false, idleTimeout: 1_000 })
}

const exists = (admin: CommonQueryMethods, name: string) =>
  admin.exists(sql.unsafe`SELECT 1 FROM pg_database WHERE datname = ${name}`)

/** Builds the template once per migration set (other processes wait on the advisory lock). */
async function ensureTemplate(url: string, admin: DatabasePool): Promise<string> {
  const name = `maskline_template_${migrationsChecksum().slice(0, 16)}`
  if (await exists(admin, name)) return name
  return admin.connect(async c => {
    await c.query(sql.unsafe`SELECT pg_advisory_lock(${TEMPLATE_LOCK}::bigint)`)
    try {
      if (await exists(c, name)) return name
      const wip = `${name}_wip`
      await c.query(sql.unsafe`DROP DATABASE IF EXISTS ${sql.identifier([wip])}`)
      await c.query(sql.unsafe`CREATE DATABASE ${sql.identifier([wip])}`)
      const pool = await createPool(withDatabase(url, wip), { maximumPoolSize: 1, captureStackTrace: false })
      try {
        await migrate(pool)
      } finally {
        await pool.end()
      }
      // Renamed only when complete: a crash mid-way leaves a _wip database, never a bad template.
      await c.query(sql.unsafe`ALTER DATABASE ${sql.identifier([wip])} RENAME TO ${sql.identifier([name])}`)
      return name
    } finally {
      await c.query(sql.unsafe`SELECT pg_advisory_unlock(${TEMPLATE_LOCK}::bigint)`)
    }
  })
}

/**
 * The embedded counterpart of the template database: a dump of a migrated PGlite, cached in the
 * temp directory per migration set (initdb alone takes seconds; loading a dump, well under one).
 */
export async function embeddedTemplate(): Promise<Blob> {
  const file = join(tmpdir(), `maskline-pglite-${migrationsChecksum().slice(0, 16)}.tar`)
  const lock = `${file}.lock`
  for (;;) {
    if (existsSync(file)) return new Blob([readFileSync(file)])
    let fd: number
    try {
      fd = openSync(lock, 'wx')
    } catch {
      // Another test process is building it; a lock older than 2 minutes is from a dead one.
      try {
        if (Date.now() - statSync(lock).mtimeMs > 120_000) unlinkSync(lock)
      } catch { /* gone meanwhile */ }
      await delay(200)
      continue
    }
    try {
      const pg = await PGlite.create()
      const server = await serveEmbedded(pg)
      const pool = await createPool(`postgres://postgres@${server.host}:${server.port}/postgres`, { maximumPoolSize: 1, captureStackTrace: false })
      try {
        await migrate(pool)
        await pool.query(sql.unsafe`CHECKPOINT`)
      } finally {
        await pool.end()
        await server.close()
      }
      const dump = await pg.dumpDataDir('none')
      await pg.close()
      const tmp = `${file}.${process.pid}`
      writeFileSync(tmp, Buffer.from(await dump.arrayBuffer()))
      renameSync(tmp, file)
    } finally {
      closeSync(fd)
      unlinkSync(lock)
    }
  }
}

export async function testDatabase(t: Teardown, opts: { onError?: (code: string) => void; maximumPoolSize?: number } = {}): Promise<Database> {
  const url = testDatabaseUrl()
  if (!url) {
    const seed = await embeddedTemplate()
    const dir = mkdtempSync(join(tmpdir(), 'maskline-test-'))
    const db = await openDatabase({ dataDir: dir, embeddedSeed: seed, ...opts })
    t.teardown(async () => {
      await db.close()
      rmSync(dir, { recursive: true, force: true })
    })
    await migrate(db.pool) // a no-op on the template; keeps the contract "migrated" explicit
    return db
  }
  const admin = await adminPool(url)
  const name = `maskline_t_${randomBytes(6).toString('hex')}`
  try {
    const template = await ensureTemplate(url, admin)
    // CREATE DATABASE copies the template; concurrent copies of one template are serialized so
    // that none of them sees another's connection to it.
    await admin.connect(async c => {
      await c.query(sql.unsafe`SELECT pg_advisory_lock(${TEMPLATE_LOCK}::bigint)`)
      try {
        await c.query(sql.unsafe`CREATE DATABASE ${sql.identifier([name])} TEMPLATE ${sql.identifier([template])}`)
      } finally {
        await c.query(sql.unsafe`SELECT pg_advisory_unlock(${TEMPLATE_LOCK}::bigint)`)
      }
    })
  } catch (err) {
    await admin.end()
    throw err
  }
  const db = await openDatabase({ databaseUrl: withDatabase(url, name), dataDir: '', ...opts })
  t.teardown(async () => {
    await db.close()
    try {
      await admin.query(sql.unsafe`DROP DATABASE IF EXISTS ${sql.identifier([name])} WITH (FORCE)`)
    } finally {
      await admin.end()
    }
  })
  return db
}
