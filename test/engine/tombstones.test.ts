// Final versions of sessions that left memory are remembered for ttlMs, then forgotten.
import t from 'tap'
import { Tombstones } from '../../engine/tombstones.js'

t.test('covers versions up to the final one until the ttl passes', async t => {
  const ts = new Tombstones(1000)
  ts.add('a', 3, 0)
  t.ok(ts.covers('a', 3))
  t.ok(ts.covers('a', 1))
  t.notOk(ts.covers('a', 4))
  t.notOk(ts.covers('b', 1))
  ts.add('a', 2, 10)
  t.ok(ts.covers('a', 3), 'an older version does not lower the mark')
  ts.prune(999)
  t.ok(ts.covers('a', 3))
  ts.prune(1000)
  t.notOk(ts.covers('a', 3))
  t.equal(ts.size, 0)
})

t.test('a newer stamp of the same id outlives the older entry', async t => {
  const ts = new Tombstones(1000)
  ts.add('a', 1, 0)
  ts.add('a', 2, 500)
  ts.prune(1000)
  t.ok(ts.covers('a', 2))
  ts.prune(1500)
  t.equal(ts.size, 0)
})

t.test('many entries are pruned and the queue compacts', async t => {
  const ts = new Tombstones(10)
  for (let k = 0; k < 5000; k++) ts.add(`s${k}`, 1, k)
  ts.prune(4000)
  t.equal(ts.size, 1009) // stamps 3991..4999 are younger than the ttl
  t.ok(ts.covers('s4999', 1))
  t.notOk(ts.covers('s0', 1))
  ts.prune(10_000)
  t.equal(ts.size, 0)
})
