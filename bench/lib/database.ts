// The database of a run. Embedded (no DATABASE_URL): a fresh DATA_DIR, so the service boots on
// exactly the population this run wrote. Real Postgres (DATABASE_URL): a fresh database created
// next to the configured one and dropped at the end, so the bench never touches existing data.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createPool, sql } from 'slonik'
import { openDatabase, type Database } from '../../sql/db.js'

export interface BenchDatabase {
  kind: 'embedded' | 'postgres'
  /** Environment for the service child: DATA_DIR or DATABASE_URL. */
  env: Record<string, string>
  /** What the report says about it (no credentials). */
  label: string
  open(opts?: { maximumPoolSize?: number }): Promise<Database>
  dispose(): Promise<void>
}

export async function createBenchDatabase(databaseUrl: string | undefined): Promise<BenchDatabase> {
  if (!databaseUrl) {
    const dataDir = mkdtempSync(join(tmpdir(), 'maskline-bench-'))
    return {
      kind: 'embedded',
      env: { DATA_DIR: dataDir },
      label: 'embedded PGlite (DATA_DIR in a temporary directory)',
      open: o => openDatabase({ dataDir, maximumPoolSize: o?.maximumPoolSize }),
      async dispose() { rmSync(dataDir, { recursive: true, force: true }) },
    }
  }
  const name = `maskline_bench_${process.pid}_${Date.now().toString(36)}`
  const admin = await createPool(databaseUrl, { maximumPoolSize: 1 })
  try {
    await admin.query(sql.unsafe`CREATE DATABASE ${sql.identifier([name])}`)
  } catch (err) {
    await admin.end()
    throw new Error(`cannot create the bench database next to DATABASE_URL (needs CREATEDB): ${(err as Error).message.split('\n')[0]}`, { cause: err })
  }
  const u = new URL(databaseUrl)
  u.pathname = `/${name}`
  const url = u.toString()
  return {
    kind: 'postgres',
    env: { DATABASE_URL: url },
    label: `Postgres at ${u.hostname}:${u.port || 5432}, fresh database ${name}`,
    open: o => openDatabase({ databaseUrl: url, dataDir: tmpdir(), maximumPoolSize: o?.maximumPoolSize }),
    async dispose() {
      try {
        await admin.query(sql.unsafe`DROP DATABASE IF EXISTS ${sql.identifier([name])} WITH (FORCE)`)
      } finally {
        await admin.end()
      }
    },
  }
}
