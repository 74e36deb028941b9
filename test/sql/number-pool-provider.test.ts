// NUMBER_POOL's `@provider` (sql/number-pool.ts): each number is stored with its provider, the
// default provider for entries without one, and a number moved to another provider in NUMBER_POOL
// takes it at the next boot (its holder and region are kept). Real Postgres, or embedded PGlite.
import t from 'tap'
import { loadNumbers, parseNumberPool, seedNumbers } from '../../sql/number-pool.js'
import { testDatabase } from '../support/db.js'

t.test('parse', async t => {
  t.same(parseNumberPool('US:+12025550100-+12025550101@twilio; GB:+447700900000 @ Telnyx+Twilio;US:+12025550102'), [
    { region: 'US', number: '+12025550100', provider: 'twilio' },
    { region: 'US', number: '+12025550101', provider: 'twilio' },
    { region: 'GB', number: '+447700900000', provider: 'telnyx+twilio' },
    { region: 'US', number: '+12025550102' },
  ])
  t.throws(() => parseNumberPool('US:+12025550100@'), /provider must be telnyx or twilio/)
  t.throws(() => parseNumberPool('US:+12025550100@sandbox'), /provider must be/)
})

t.test('seeded with their providers; moved numbers follow NUMBER_POOL', async t => {
  const db = await testDatabase(t)
  t.equal(await seedNumbers(db.pool, 'US:+12025550100-+12025550101@twilio;US:+12025550102', 'telnyx'), 3)
  const providers = async () => Object.fromEntries((await loadNumbers(db.pool)).map(n => [n.number, n.provider]))
  t.same(await providers(), { '+12025550100': 'twilio', '+12025550101': 'twilio', '+12025550102': 'telnyx' })
  t.equal(await seedNumbers(db.pool, 'US:+12025550100@twilio+telnyx;US:+12025550101-+12025550102@twilio', 'telnyx'), 0, 'nothing new')
  t.same(await providers(), { '+12025550100': 'twilio+telnyx', '+12025550101': 'twilio', '+12025550102': 'twilio' })
})
