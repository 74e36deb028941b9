// sql/vocabulary/iso-time.ts: the hot-path timestamp formatter answers exactly what
// Date#toISOString answers, across day, month, year and leap boundaries, before 1970, at the ends
// of the range, and for values it hands to Date (fractions, NaN, out of range: same text or the
// same RangeError).
import t from 'tap'
import { isoTime } from '../../sql/vocabulary/iso-time.js'

const same = (ms: number) => isoTime(ms) === new Date(ms).toISOString()

t.test('every millisecond of a day boundary and a stride through years agree with Date', async t => {
  const bad: number[] = []
  const midnight = Date.UTC(2026, 10, 24)
  for (let ms = midnight - 5_000; ms < midnight + 5_000; ms++) if (!same(ms)) bad.push(ms)
  // A prime stride from 1960 to 2100, crossing months, years, 29 February and 1970 itself.
  for (let ms = Date.UTC(1960, 0, 1); ms < Date.UTC(2100, 0, 1); ms += 86_399_977) if (!same(ms)) bad.push(ms)
  t.same(bad, [])
})

t.test('alternating between days (the cached day changes back and forth)', async t => {
  const a = Date.UTC(2024, 1, 29, 23, 59, 59, 999), b = Date.UTC(2024, 2, 1, 0, 0, 0, 1)
  for (let i = 0; i < 10; i++) {
    t.equal(isoTime(a), '2024-02-29T23:59:59.999Z')
    t.equal(isoTime(b), '2024-03-01T00:00:00.001Z')
  }
})

t.test('edges: before 1970, extended years, the range limits', async t => {
  for (const ms of [0, -1, -86_400_000, -86_400_001, -62_167_219_200_000, -62_167_219_200_001, 253_402_300_799_999, 253_402_300_800_000, 8.64e15, -8.64e15]) {
    t.equal(isoTime(ms), new Date(ms).toISOString(), String(ms))
  }
})

t.test('values it does not format itself go through Date', async t => {
  t.equal(isoTime(1_795_525_790_195.7), new Date(1_795_525_790_195.7).toISOString())
  t.throws(() => isoTime(Number.NaN), RangeError)
  t.throws(() => isoTime(8.64e15 + 1), RangeError)
  t.throws(() => isoTime(Infinity), RangeError)
})
