// Schema migrations: sql/migrations/NNN_name.sql, applied in order, each in its own transaction
// and recorded in schema_migrations. Safe when several processes start at once: every migration
// transaction first takes the same transaction-scoped advisory lock, then checks whether the
// version is already recorded. (On PGlite, where all connections share one backend, the embedded
// server runs a transaction without interleaving, which gives the same guarantee.)
//
// Statements go through the normal slonik pool (extended protocol, one statement per query), so
// files are split with a splitter that understands quotes, dollar quotes and comments.
// Ours, not a migration tool: the maintained ones serialize runners with a session advisory lock
// on a connection of their own (node-pg-migrate: pg_try_advisory_lock), which on the embedded
// server's one shared PGlite session (sql/pglite-server.ts) excludes nobody; a transaction-scoped
// lock per migration does, on both backends.
import { createHash } from 'node:crypto'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { sql, type DatabasePool } from 'slonik'

const MIGRATIONS_DIR = fileURLToPath(new URL('./migrations/', import.meta.url))

// Any fixed 64-bit key; shared by every process migrating this database.
const MIGRATION_LOCK = 7_202_504_301_117

export interface MigrationFile {
  version: string
  name: string
  text: string
  checksum: string
}

export function readMigrations(dir: string = MIGRATIONS_DIR): MigrationFile[] {
  return readdirSync(dir)
    .filter(f => /^\d{3}_[\w-]+\.sql$/.test(f))
    .sort()
    .map(name => {
      const text = readFileSync(join(dir, name), 'utf8')
      return { version: name.slice(0, 3), name, text, checksum: createHash('sha256').update(text).digest('hex') }
    })
}

/** One hash over every migration file: names a template database built from exactly them. */
export function migrationsChecksum(dir: string = MIGRATIONS_DIR): string {
  const h = createHash('sha256')
  for (const m of readMigrations(dir)) h.update(`${m.name}\0${m.checksum}\0`)
  return h.digest('hex')
}

/** Splits a SQL script into statements (without the terminating semicolons). */
export function splitSqlStatements(script: string): string[] {
  const out: string[] = []
  let start = 0
  let i = 0
  const n = script.length
  const push = (end: number) => {
    const stmt = script.slice(start, end).trim()
    if (stripComments(stmt).trim()) out.push(stmt)
  }
  while (i < n) {
    const c = script[i]!
    const next = script[i + 1]
    if (c === '-' && next === '-') {
      const eol = script.indexOf('\n', i)
      i = eol === -1 ? n : eol + 1
    } else if (c === '/' && next === '*') {
      let depth = 1
      i += 2
      while (i < n && depth > 0) {
        if (script[i] === '/' && script[i + 1] === '*') { depth++; i += 2 } else if (script[i] === '*' && script[i + 1] === '/') { depth--; i += 2 } else i++
      }
    } else if (c === "'" || c === '"') {
      // E'...' strings allow backslash escapes; '' and "" are escaped quotes everywhere.
      const escapes = c === "'" && /[eE]/.test(script[i - 1] ?? '') && !/\w/.test(script[i - 2] ?? '')
      i++
      while (i < n) {
        if (escapes && script[i] === '\\') { i += 2; continue }
        if (script[i] === c) {
          if (script[i + 1] === c) { i += 2; continue }
          break
        }
        i++
      }
      i++
    } else if (c === '$') {
      const tag = /^\$([A-Za-z_][A-Za-z0-9_]*)?\$/.exec(script.slice(i))
      if (tag && !/\w/.test(script[i - 1] ?? '')) {
        const close = script.indexOf(tag[0], i + tag[0].length)
        i = close === -1 ? n : close + tag[0].length
      } else i++
    } else if (c === ';') {
      push(i)
      i++
      start = i
    } else i++
  }
  push(n)
  return out
}

function stripComments(s: string): string {
  return s.replace(/--[^\n]*/g, '').replace(/\/\*[\s\S]*?\*\//g, '')
}

/** A statement read from a file as a query (slonik accepts only template-literal shaped input). */
function raw(statement: string) {
  const parts = Object.freeze(Object.assign([statement], { raw: Object.freeze([statement]) }))
  return sql.unsafe(parts as unknown as TemplateStringsArray)
}

/**
 * Applies every pending migration; returns the names applied by this call. Throws when an
 * already applied file was edited afterwards (a database built from another schema).
 */
export async function migrate(pool: DatabasePool, dir: string = MIGRATIONS_DIR): Promise<string[]> {
  const applied: string[] = []
  for (const m of readMigrations(dir)) {
    const did = await pool.transaction(async tx => {
      await tx.query(sql.unsafe`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK}::bigint)`)
      await tx.query(sql.unsafe`
        CREATE TABLE IF NOT EXISTS schema_migrations (
          version    text PRIMARY KEY,
          name       text NOT NULL,
          checksum   text NOT NULL,
          applied_at timestamptz NOT NULL DEFAULT now()
        )`)
      const done = await tx.maybeOneFirst(sql.unsafe`SELECT checksum FROM schema_migrations WHERE version = ${m.version}`)
      if (done !== null) {
        if (done !== m.checksum) throw new Error(`migration ${m.name} was changed after it was applied to this database`)
        return false
      }
      for (const statement of splitSqlStatements(m.text)) await tx.query(raw(statement))
      await tx.query(sql.unsafe`INSERT INTO schema_migrations (version, name, checksum) VALUES (${m.version}, ${m.name}, ${m.checksum})`)
      return true
    }, 0)
    if (did) applied.push(m.name)
  }
  return applied
}
