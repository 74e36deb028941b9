// The routing index: E.164 keys and the open-addressing table against a Map, through growth and
// backward-shift deletions.
import t from 'tap'
import fc from 'fast-check'
import { PartyIndex, e164Key } from '../../engine/party-index.js'
import type { LiveSession } from '../../engine/live-session.js'

t.test('e164Key: the digits of a valid E.164 number, 0 for anything else', async t => {
  t.equal(e164Key('+12025550100'), 12025550100)
  t.equal(e164Key('+447700900123'), 447700900123)
  t.equal(e164Key('+999999999999999'), 999999999999999, '15 digits are exact')
  t.equal(e164Key('+1234567'), 1234567, '7 digits')
  for (const bad of ['', '+', '12025550100', '+0123456789', '+123456', '+1234567890123456', '+1202555010a', '+1 202 555 0100', 'anonymous', '+-12345678']) {
    t.equal(e164Key(bad), 0, JSON.stringify(bad))
  }
})

const fake = (n: number) => ({ n }) as unknown as LiveSession

type Op = { op: 'set'; p: number; c: number; agent: boolean; v: number } | { op: 'delete'; p: number; c: number; v: number }

t.test('behaves like a Map keyed by (proxy, caller), with the role kept', async t => {
  const sessions = Array.from({ length: 8 }, (_, k) => fake(k))
  // Few distinct keys: many collisions, long probe runs, deletions inside them.
  const key = fc.integer({ min: 1, max: 12 }).map(k => 10_000_000 + k)
  const opArb: fc.Arbitrary<Op> = fc.oneof(
    fc.record({ op: fc.constant('set' as const), p: key, c: key, agent: fc.boolean(), v: fc.integer({ min: 0, max: 7 }) }),
    fc.record({ op: fc.constant('delete' as const), p: key, c: key, v: fc.integer({ min: 0, max: 7 }) }),
  )
  // One shard gives the longest probe runs; four check that entries keep to their shard.
  fc.assert(fc.property(fc.array(opArb, { maxLength: 300 }), fc.constantFrom(1, 4, 256), (ops, shards) => {
    const index = new PartyIndex(16, shards)
    const model = new Map<string, { agent: boolean; v: number }>()
    for (const o of ops) {
      const k = `${o.p}/${o.c}`
      if (o.op === 'set') {
        index.set(o.p, o.c, o.agent, sessions[o.v]!)
        model.set(k, { agent: o.agent, v: o.v })
      } else {
        index.delete(o.p, o.c, sessions[o.v]!)
        if (model.get(k)?.v === o.v) model.delete(k)
      }
      if (index.size !== model.size) return false
    }
    for (let p = 10_000_001; p <= 10_000_012; p++) {
      for (let c = 10_000_001; c <= 10_000_012; c++) {
        const want = model.get(`${p}/${c}`)
        const slot = index.find(p, c)
        if (want === undefined ? slot !== -1 : slot < 0 || index.sessionAt(slot) !== sessions[want.v] || index.isAgentAt(slot) !== want.agent) return false
      }
    }
    return true
  }), { numRuns: 300 })
  t.pass('property holds')
})

t.test('grows past its load limit and keeps every entry', async t => {
  const index = new PartyIndex(16, 1)
  const s = fake(1)
  for (let k = 1; k <= 5000; k++) index.set(12025550000 + (k % 7), 447700900000 + k, k % 2 === 0, s)
  t.equal(index.size, 5000)
  let found = 0
  for (let k = 1; k <= 5000; k++) {
    const slot = index.find(12025550000 + (k % 7), 447700900000 + k)
    if (slot >= 0 && index.isAgentAt(slot) === (k % 2 === 0)) found++
  }
  t.equal(found, 5000)
  t.equal(index.get(0, 447700900001), undefined, 'key 0 is never found')
  t.throws(() => index.set(0, 1, false, s))
})

t.test('grows by shards: one growth moves a 256th of the entries, not all of them', async t => {
  // One table for two million parties stopped the event loop for 20-250 ms at each growth
  // (bench/route.bench.ts create.max); a shard of it, under a millisecond.
  const index = new PartyIndex()
  const s = fake(1)
  const n = 200_000
  for (let k = 1; k <= n; k++) index.set(12025550000 + (k % 1000), 447700900000 + k, false, s)
  t.equal(index.size, n)
  const even = n / 256 / 0.7 // slots a shard needs at the mean
  t.ok(index.largestTable <= 4 * even, `largest table ${index.largestTable} slots, a shard's share is ~${Math.round(even)}`)
  let found = 0
  for (let k = 1; k <= n; k++) if (index.get(12025550000 + (k % 1000), 447700900000 + k) === s) found++
  t.equal(found, n, 'every entry found after the shards grew')

  const reserved = new PartyIndex()
  reserved.reserve(n)
  const before = reserved.largestTable
  for (let k = 1; k <= n; k++) reserved.set(12025550000 + (k % 1000), 447700900000 + k, false, s)
  t.equal(reserved.largestTable, before, 'reserve() leaves no shard to grow')
})
