// Shared vocabulary (test/layering.test.ts): a leaf every layer may import, sql/ included.
//
// Epoch milliseconds → the ISO 8601 text Date#toISOString gives (`2026-11-24T13:07:23.045Z`), for
// the hot paths: every event envelope, every call row of a record batch and every session answer
// formats a few timestamps. `new Date(ms).toISOString()` costs ~450 ns here (a Date allocation and
// a runtime call); this costs ~40 ns: the `YYYY-MM-DDT` of the last UTC days used is kept, and the
// time of day is looked up from tables of two- and three-digit strings. The output is identical for
// every integer time value (test/api/iso-time.test.ts compares the two); anything else (fractions,
// NaN, out of range) goes through Date, which also keeps its RangeError.

const DAY_MS = 86_400_000
/** The largest time value a Date holds (ECMA-262 21.4.1.1). */
const MAX_MS = 8.64e15
const TWO = Array.from({ length: 60 }, (_, i) => String(i).padStart(2, '0'))
const THREE = Array.from({ length: 1000 }, (_, i) => String(i).padStart(3, '0'))

/**
 * The text of recent UTC days, direct-mapped by day number: a session answer mixes today
 * (createdAt) and tomorrow (expiresAt), and a single cached day was re-made on every switch.
 */
const SLOTS = 16
const slotDay = new Float64Array(SLOTS).fill(Number.NaN)
const slotPrefix: string[] = new Array<string>(SLOTS).fill('')

export function isoTime(ms: number): string {
  if (!Number.isInteger(ms) || ms > MAX_MS || ms < -MAX_MS) return new Date(ms).toISOString() // Date's text, or its RangeError
  const day = Math.floor(ms / DAY_MS)
  const slot = day & (SLOTS - 1)
  if (slotDay[slot] !== day) {
    const s = new Date(day * DAY_MS).toISOString()
    slotDay[slot] = day
    slotPrefix[slot] = s.slice(0, s.indexOf('T') + 1)
  }
  const t = ms - day * DAY_MS
  return `${slotPrefix[slot]!}${TWO[(t / 3_600_000) | 0]!}:${TWO[((t / 60_000) | 0) % 60]!}:${TWO[((t / 1000) | 0) % 60]!}.${THREE[t % 1000]!}Z`
}
