// Opaque list cursors that walk every row exactly once (contract D7), even when many rows share a
// timestamp: a time-ordered cursor is the last row's timestamp AND id, `<ISO>_<uuid>`, compared
// as a row value `(ts, id) < (cursor.ts, cursor.id)`. The spec calls it a timestamp cursor, so a
// bare ISO 8601 timestamp is accepted too (rows strictly before it).
import { UUID_RE } from './vocabulary/ids.js'

export interface TimeCursor {
  ms: number
  id: string | null
}

const ISO = /^\d{4}-\d\d-\d\d(?:[T ]\d\d:\d\d(?::\d\d(?:\.\d{1,9})?)?(?:Z|[+-]\d\d(?::?\d\d)?)?)?$/i

export function encodeTimeCursor(ms: number, id: string): string {
  return `${new Date(ms).toISOString()}_${id}`
}

/** null when `after` is neither a cursor we issued nor an ISO timestamp. */
export function decodeTimeCursor(after: string): TimeCursor | null {
  const [stamp, id, extra] = after.split('_')
  if (extra !== undefined || !stamp || !ISO.test(stamp)) return null
  if (id !== undefined && !UUID_RE.test(id)) return null
  const ms = parseIsoMs(stamp)
  if (!Number.isFinite(ms)) return null
  return { ms, id: id ?? null }
}

// Milliseconds only, finer digits are dropped (our timestamps are ms); no offset means UTC.
function parseIsoMs(stamp: string): number {
  let s = stamp.toUpperCase().replace(' ', 'T').replace(/(\.\d{3})\d+/, '$1')
  if (!s.includes('T')) s += 'T00:00:00'
  if (!/(Z|[+-]\d\d(:?\d\d)?)$/.test(s.slice(10))) s += 'Z'
  return Date.parse(s)
}

export function isUuid(s: string | undefined | null): s is string {
  return typeof s === 'string' && UUID_RE.test(s)
}
