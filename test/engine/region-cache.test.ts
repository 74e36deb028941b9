// regionOf caches the region of a shared calling code by the number minus its last four
// digits. It must answer exactly what libphonenumber-js does (parseRegion) for every number: here
// over every NANP area code with valid and invalid exchanges, numbers of every length around the
// plans' lengths, every shared calling code, and many numbers sharing a cached prefix.
import t, { type Test } from 'tap'
import metadata from 'libphonenumber-js/min/metadata'
import { parseRegion, regionOf } from '../../engine/region.js'

/** A small deterministic generator, so a failure names a number that fails again. */
function rng(seed: number) {
  let s = seed >>> 0
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0
    return s / 2 ** 32
  }
}
const digits = (r: () => number, n: number) => Array.from({ length: n }, () => Math.floor(r() * 10)).join('')

function compare(t: Test, numbers: Iterable<string>, what: string) {
  let n = 0
  const wrong: string[] = []
  for (const e164 of numbers) {
    n++
    const expected = parseRegion(e164)
    if (regionOf(e164) !== expected && wrong.length < 10) wrong.push(`${e164}: ${regionOf(e164)} ≠ ${expected}`)
  }
  t.same(wrong, [], `${what}: ${n} numbers, regionOf = the parser`)
}

t.test('NANP: every area code, valid and invalid exchanges, a cached prefix then other tails', async t => {
  const r = rng(1)
  const numbers: string[] = []
  for (let area = 200; area <= 999; area++) {
    for (const exchange of ['100', '555', '211', '234', String(200 + Math.floor(r() * 800)), String(200 + Math.floor(r() * 800))]) {
      // Four tails per prefix: the first fills the cache, the others must agree with the parser.
      for (let k = 0; k < 4; k++) numbers.push(`+1${area}${exchange}${digits(r, 4)}`)
    }
  }
  compare(t, numbers, 'NANP 10-digit')
  // Canada after the US and back, on the same area code: the answer is the number's, not the area's.
  compare(t, ['+14165550123', '+14161000000', '+14162000000', '+14165550199', '+12025550100', '+12021000000'], 'CA/US pairs')
})

t.test('every shared calling code, lengths 4 to 14 national digits, many tails per prefix', async t => {
  const r = rng(2)
  const shared = Object.entries(metadata.country_calling_codes as Record<string, string[]>).filter(([, c]) => c.length > 1).map(([code]) => code)
  t.ok(shared.includes('1') && shared.includes('44') && shared.includes('7'), 'the shared codes are found')
  const numbers: string[] = []
  for (const code of shared) {
    for (let len = 4; len <= 14 - code.length + 1; len++) {
      for (let p = 0; p < 60; p++) {
        const prefix = digits(r, Math.max(0, len - 4))
        for (let k = 0; k < 3; k++) numbers.push(`+${code}${prefix}${digits(r, Math.min(4, len))}`)
      }
    }
  }
  compare(t, numbers, 'shared codes')
})

t.test('random numbers of every calling code', async t => {
  const r = rng(3)
  const codes = Object.keys(metadata.country_calling_codes)
  const numbers: string[] = []
  for (let i = 0; i < 40_000; i++) {
    const code = codes[Math.floor(r() * codes.length)]!
    numbers.push(`+${code}${digits(r, 6 + Math.floor(r() * 8))}`)
  }
  compare(t, numbers, 'random')
})

t.test('not E.164 digits: parsed, never cached', async t => {
  compare(t, ['+1 416 555 0123', '+1416555012x', '+1', '+44', '+999123456'], 'odd input')
})
