// How the store reads Postgres values, one definition for slonik's pools (sql/db.ts) and the plain
// `pg` path (sql/direct.ts), so a row reads the same whichever path fetched it:
//   timestamptz, timestamp -> epoch milliseconds (number; sub-millisecond digits are dropped)
//   int8 (count(*), bigint) -> number (our int8 values are counts and epoch ms, far below 2^53)
//   numeric                 -> string, exact (money and billing quantities are never floats)
//   date                    -> 'YYYY-MM-DD' string
//   bytea -> Buffer, json/jsonb -> parsed value, int4 -> number (pg defaults)
import pg from 'pg'
import type { DriverTypeParser } from 'slonik'

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

const parsers: ReadonlyArray<DriverTypeParser & { oid: number }> = [
  { name: 'timestamptz', oid: 1184, parse: parseTimestampMs },
  { name: 'timestamp', oid: 1114, parse: parseTimestampMs },
  { name: 'int8', oid: 20, parse: (v: string) => Number(v) },
  { name: 'numeric', oid: 1700, parse: (v: string) => v },
  { name: 'date', oid: 1082, parse: (v: string) => v },
]

/** For slonik's pool configuration (parsers by type name). */
export const TYPE_PARSERS: readonly DriverTypeParser[] = parsers.map(({ name, parse }) => ({ name, parse }))

const byOid = new Map(parsers.map(p => [p.oid, p.parse]))

/** For `pg` queries (parsers by type oid; pg's own for every other type and for binary results). */
export const PG_TYPES: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    (format !== 'binary' && byOid.get(oid)) || pg.types.getTypeParser(oid, format as 'text')) as pg.CustomTypesConfig['getTypeParser'],
}
