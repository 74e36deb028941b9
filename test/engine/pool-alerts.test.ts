// contract D12: pool alerts computed in the engine, with a simulated clock. One crossing per
// threshold on the way down (20 %, 10 %, 5 %), one on recovery above 25 %, none for creates that
// keep a region inside its level, none for a share wobbling between a threshold and 25 %.
import t from 'tap'
import { PoolAlerts, nextPoolLevel, regionCounts } from '../../engine/pool-alerts.js'
import { harness, MINUTE, us, gb, type Harness } from './helpers.js'
import type { E164, SessionId } from '../../engine/index.js'

t.test('nextPoolLevel: thresholds and hysteresis', async t => {
  t.equal(nextPoolLevel(0, 20, 100), 0, '20 % is not below 20 %')
  t.equal(nextPoolLevel(0, 19, 100), 1)
  t.equal(nextPoolLevel(0, 9, 100), 2)
  t.equal(nextPoolLevel(0, 4, 100), 3, 'a fall past several thresholds is one step to the deepest')
  t.equal(nextPoolLevel(1, 15, 100), 1, 'still below 20 %: no new level')
  t.equal(nextPoolLevel(1, 24, 100), 1, 'back over 20 % but not over 25 %: stays low')
  t.equal(nextPoolLevel(2, 25, 100), 2, '25 % is not above 25 %')
  t.equal(nextPoolLevel(3, 26, 100), 0, 'recovered above 25 %')
  t.equal(nextPoolLevel(0, 0, 0), 0, 'an empty region has no share')
})

t.test('regionCounts adds the providers of a region', async t => {
  t.same(regionCounts([
    { region: 'US', provider: 'a', total: 10, available: 3, inUse: 5, cooldown: 2 },
    { region: 'US', provider: 'b', total: 10, available: 7, inUse: 3, cooldown: 0 },
    { region: 'GB', provider: 'a', total: 4, available: 4, inUse: 0, cooldown: 0 },
  ]), [{ region: 'US', total: 20, available: 10, inUse: 8, cooldown: 2 }, { region: 'GB', total: 4, available: 4, inUse: 0, cooldown: 0 }])
})

t.test('through the engine: creates, ends and the cooldown clock', async t => {
  // 20 US numbers, 2 GB numbers; a 15-minute cooldown.
  const numbers = [
    ...Array.from({ length: 20 }, (_, i) => ({ number: us(i), region: 'US', provider: 'telnyx' })),
    { number: gb(0), region: 'GB', provider: 'telnyx' }, { number: gb(1), region: 'GB', provider: 'telnyx' },
  ]
  const h: Harness = harness({ numbers, cooldownMs: 15 * MINUTE })
  const alerts = new PoolAlerts()
  const check = () => alerts.check(h.engine.poolCounts(h.clock.now))
  const ids: SessionId[] = []
  // One agent with many customers: a number carries each party once, so each session takes a new number.
  const create = (i: number) => ids.push(h.create({ customerPhone: `+1415555${3000 + i}` as E164 }).id)

  t.same(check(), [], 'a full pool: nothing')
  for (let i = 0; i < 16; i++) create(i)
  t.same(check(), [], '4 of 20 free (20 %): not below 20 %')
  create(16)
  t.match(check(), [{ region: 'US', from: 0, to: 1, threshold: 20, total: 20, available: 3, inUse: 17, cooldown: 0 }], '15 %: below 20 %')
  t.same(check(), [], 'once per crossing, not per check')
  create(17)
  t.same(check(), [], '2 of 20 free is 10 %: not below 10 %, still level 1')
  create(18)
  t.match(check(), [{ region: 'US', from: 1, to: 2, threshold: 10, available: 1 }], '5 %: below 10 %, not below 5 %')
  create(19)
  t.match(check(), [{ region: 'US', from: 2, to: 3, threshold: 5, available: 0 }], 'none free: below 5 %')
  t.same(check(), [])

  // Ending sessions frees nothing until the cooldown has passed.
  for (const id of ids.slice(0, 10)) h.send(id, { type: 'end' })
  h.clock.advance(15 * MINUTE + 1) // grace (15 min) over: expired, numbers cooling down
  h.tick()
  t.same(check(), [], 'released but cooling down: still low')
  h.clock.advance(15 * MINUTE)
  t.match(check(), [{ region: 'US', from: 3, to: 0, threshold: 25, available: 10, cooldown: 0 }], 'cooldown over: 50 % free, recovered once')
  t.same(check(), [])
  t.equal(alerts.level('GB'), 0, 'the other region never moved')
})
