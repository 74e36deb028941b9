// NUMBER_POOL parsing (contract D1): pure, so tested without a database.
import t from 'tap'
import { DEFAULT_NUMBER_POOL, parseNumberPool } from '../../sql/number-pool.js'

t.test('the default pool is 100 fictional US numbers', async t => {
  const pool = parseNumberPool(DEFAULT_NUMBER_POOL)
  t.equal(pool.length, 100)
  t.same(pool[0], { region: 'US', number: '+12025550100' })
  t.same(pool[99], { region: 'US', number: '+12025550199' })
})

t.test('ranges, single numbers, spacing, duplicates', async t => {
  t.same(parseNumberPool(' us : +12025550100 - +12025550101 ; GB:+447700900000;\nGB:+447700900000;US:+12025550101 '), [
    { region: 'US', number: '+12025550100' },
    { region: 'US', number: '+12025550101' },
    { region: 'GB', number: '+447700900000' },
  ])
  t.equal(parseNumberPool('US:+12025550100-+12025550199;GB:+447700900000-+447700900099').length, 200)
})

t.test('bad entries are refused with the entry named', async t => {
  t.throws(() => parseNumberPool(''), /empty/)
  t.throws(() => parseNumberPool('+12025550100'), /REGION:number/)
  t.throws(() => parseNumberPool('US:12025550100'), /E\.164/)
  t.throws(() => parseNumberPool('US:+12025550199-+12025550100'), /reversed/)
  t.throws(() => parseNumberPool('US:+12025550100-+120255501000'), /differ in length/)
  t.throws(() => parseNumberPool('US:+12025550000-+12025999999'), /range over/)
  t.throws(() => parseNumberPool('U S:+12025550100'), /bad region/)
})
