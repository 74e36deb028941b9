// Live sessions by id: 256 Maps chosen by the id's last two hex digits, so that no growth rehashes
// a million entries at once. Behaves as one Map for any string.
import t from 'tap'
import fc from 'fast-check'
import { IdMap, shardOf } from '../../engine/id-map.js'

t.test('shardOf: the last two hex digits of an id, either case; some shard for any string', async t => {
  t.equal(shardOf('0190a000-0000-7000-8000-000000000000'), 0)
  t.equal(shardOf('0190a000-0000-7000-8000-0000000000ff'), 255)
  t.equal(shardOf('0190a000-0000-7000-8000-0000000000FF'), 255)
  t.equal(shardOf('0190a000-0000-7000-8000-0000000000a7'), 0xa7)
  const seen = new Set<number>()
  for (let k = 0; k < 256; k++) seen.add(shardOf(`0190a000-0000-7000-8000-0000000000${k.toString(16).padStart(2, '0')}`))
  t.equal(seen.size, 256, 'every shard is used')
  for (const odd of ['', 'x', 'zz', '\u{1F600}', 'session-1']) {
    const s = shardOf(odd)
    t.ok(Number.isInteger(s) && s >= 0 && s < 256, JSON.stringify(odd))
  }
})

t.test('behaves like a Map', async t => {
  const key = fc.oneof(fc.uuid(), fc.string({ maxLength: 3 }), fc.constantFrom('a', 'b', '0190a000-0000-7000-8000-0000000000ff'))
  const op = fc.record({ del: fc.boolean(), k: key, v: fc.integer() })
  fc.assert(fc.property(fc.array(op, { maxLength: 200 }), ops => {
    const m = new IdMap<number>()
    const model = new Map<string, number>()
    for (const o of ops) {
      if (o.del) {
        if (m.delete(o.k) !== model.delete(o.k)) return false
      } else {
        m.set(o.k, o.v)
        model.set(o.k, o.v)
      }
      if (m.size !== model.size) return false
    }
    for (const [k, v] of model) if (m.get(k) !== v) return false
    return [...m.values()].sort().join() === [...model.values()].sort().join()
  }), { numRuns: 300 })
  t.pass('property holds')
})
