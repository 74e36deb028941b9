// Keyset pages over (created_at, key) ascending, for the Twilio Proxy façade's lists: stable while
// rows are added, each row exactly once. A page asks one row more than it shows, to know whether
// there is a next one.
import { sql, type FragmentSqlToken } from 'slonik'
import type { Db } from './transaction.js'
import { ts } from './transaction.js'

/** A row's position; `dir`: the page holds the rows after it, or the rows before it. */
export interface Keyset { ms: number; id: string; dir: 'after' | 'before' }

export interface PageRequest { size: number; cursor: Keyset | null }

export interface Page<T> { rows: T[]; next: Keyset | null; previous: Keyset | null }

/**
 * `from`: `FROM … WHERE …` (no ORDER BY); `key`: the key column (uuid or text) paired with created_at.
 * Rows must select `created_at` (epoch ms) and `key`.
 */
export async function keysetPage<T extends { created_at: number; key: string }>(
  db: Db, select: FragmentSqlToken, from: FragmentSqlToken, key: FragmentSqlToken, req: PageRequest,
): Promise<Page<T>> {
  const c = req.cursor
  const limit = req.size + 1
  const keyText = sql.fragment`${key}::text`
  let rows: T[]
  if (c === null || c.dir === 'after') {
    const where = c ? sql.fragment`AND (created_at, ${keyText}) > (${ts(c.ms)}, ${c.id})` : sql.fragment``
    rows = [...await db.any(sql.unsafe`SELECT ${select}, ${keyText} AS key ${from} ${where} ORDER BY created_at, ${keyText} LIMIT ${limit}`)] as T[]
    const more = rows.length > req.size
    if (more) rows = rows.slice(0, req.size)
    const last = rows[rows.length - 1]
    const first = rows[0]
    return {
      rows,
      next: more && last ? { ms: last.created_at, id: last.key, dir: 'after' } : null,
      previous: c && first ? { ms: first.created_at, id: first.key, dir: 'before' } : null,
    }
  }
  rows = [...await db.any(sql.unsafe`SELECT ${select}, ${keyText} AS key ${from} AND (created_at, ${keyText}) < (${ts(c.ms)}, ${c.id}) ORDER BY created_at DESC, ${keyText} DESC LIMIT ${limit}`)] as T[]
  const more = rows.length > req.size
  if (more) rows = rows.slice(0, req.size)
  rows.reverse()
  const last = rows[rows.length - 1]
  const first = rows[0]
  return {
    rows,
    next: last ? { ms: last.created_at, id: last.key, dir: 'after' } : null,
    previous: more && first ? { ms: first.created_at, id: first.key, dir: 'before' } : null,
  }
}
