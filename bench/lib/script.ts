// What the standalone Postgres benches (bench/pg-*.bench.ts) share: their options, the database
// they need and the statements they take from the command line.
import { tmpdir } from 'node:os'
import { createPool, sql, type DatabasePool, type FragmentSqlToken } from 'slonik'
import { openDatabase, type Database } from '../../sql/db.js'

/** `--name value` options and `--flag` switches of process.argv. */
export function scriptArgs(argv = process.argv.slice(2)) {
  const opt = (name: string, dflt: string): string => {
    const i = argv.indexOf(name)
    return i === -1 ? dflt : (argv[i + 1] ?? dflt)
  }
  return {
    opt,
    /** A number option; `_` separators allowed (`--rows 20_000`). */
    num: (name: string, dflt: number) => Number(opt(name, String(dflt)).replaceAll('_', '')),
    flag: (name: string) => argv.includes(name),
  }
}

/** DATABASE_URL, or exit: these benches need a real Postgres (a scratch database is made next to it). */
export function requireDatabaseUrl(): string {
  const url = process.env.DATABASE_URL
  if (!url) {
    console.error('DATABASE_URL is required (a real Postgres; a scratch database is created next to it)')
    process.exit(2)
  }
  return url
}

/** A statement given on the command line, as a query (slonik takes template-literal input only). */
export function rawSql(statement: string) {
  const parts = Object.freeze(Object.assign([statement], { raw: Object.freeze([statement]) }))
  return sql.unsafe(parts as unknown as TemplateStringsArray)
}

/**
 * A fresh database `name` next to `url`, opened for `fn` with one connection (the backend whose
 * work is timed), dropped afterwards unless `keep` (then left for EXPLAIN).
 */
export async function withScratchDatabase(url: string, name: string, keep: boolean, fn: (db: Database) => Promise<void>): Promise<void> {
  const admin = await createPool(url, { maximumPoolSize: 1 })
  await admin.query(sql.unsafe`CREATE DATABASE ${sql.identifier([name])}`)
  const u = new URL(url)
  u.pathname = `/${name}`
  const db = await openDatabase({ databaseUrl: u.toString(), dataDir: tmpdir(), maximumPoolSize: 1 })
  try {
    await fn(db)
  } finally {
    await db.close()
    if (keep) console.log(`# kept database ${name}`)
    else await admin.query(sql.unsafe`DROP DATABASE IF EXISTS ${sql.identifier([name])} WITH (FORCE)`)
    await admin.end()
  }
}

/** One `--steps` entry: its `;`-separated statements in turn, then ANALYZE. */
export async function applyStep(pool: DatabasePool, step: string): Promise<void> {
  for (const statement of step.split(';').filter(x => x.trim())) await pool.query(rawSql(statement))
  await pool.query(sql.unsafe`ANALYZE`)
}

/** In SQL, the id tenantIdOf (bench/lib/population.ts) gives the tenant whose number `t` computes. */
export const tenantIdSql = (t: FragmentSqlToken) => sql.fragment`('0190a000-0000-7000-8000-' || lpad(to_hex(${t}), 12, '0'))::uuid`

/** `n` ENTERPRISE tenants with ids tenantIdOf(0 … n-1). */
export async function seedTenants(pool: DatabasePool, n: number): Promise<void> {
  await pool.query(sql.unsafe`
    INSERT INTO tenants (id, name, tier, salt)
    SELECT ${tenantIdSql(sql.fragment`t`)}, 'bench ' || t, 'ENTERPRISE', decode('00', 'hex')
    FROM generate_series(0, ${n - 1}) t`)
}
