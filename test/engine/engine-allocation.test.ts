// contract D4 allocation: the customer's region, then the agent's, then any; a number the tenant
// already holds before a free one; one tenant per number; never two live sessions sharing a
// participant on one number (contract 3.1); pool-exhausted only when nothing fits.
import t from 'tap'
import { RING_TRIES } from '../../engine/allocate-proxy.js'
import { type E164 } from '../../engine/index.js'
import { AGENT, MINUTE, TENANT_A, TENANT_B, ca, gb, harness, input, ok, us } from './helpers.js'

t.test('the customer region comes first, then the agent region, then any', async t => {
  const h = harness()
  t.equal(ok(h.engine.planCreate(input({ agentPhone: us(50), customerPhone: gb(60) }), h.clock.now)).next.proxyNumber, gb(0))
  t.equal(ok(h.engine.planCreate(input({ agentPhone: gb(50), customerPhone: us(60) }), h.clock.now)).next.proxyNumber, us(0))
  // Canada has no numbers: the agent's GB, then (both CA) any region in pool order.
  t.equal(ok(h.engine.planCreate(input({ agentPhone: gb(50), customerPhone: ca(60) }), h.clock.now)).next.proxyNumber, gb(0))
  t.equal(ok(h.engine.planCreate(input({ agentPhone: ca(50), customerPhone: ca(60) }), h.clock.now)).next.proxyNumber, us(0))
})

t.test('a number the tenant already holds is preferred when neither party is on it', async t => {
  const h = harness()
  const first = h.create({ agentPhone: us(50), customerPhone: us(60) })
  const second = h.create({ agentPhone: us(51), customerPhone: us(61) })
  t.equal(second.proxyNumber, first.proxyNumber)
  t.same(h.engine.poolCounts(h.clock.now).find(c => c.region === 'US'), { region: 'US', provider: 'telnyx', total: 3, available: 2, inUse: 1, cooldown: 0 })
})

t.test('region comes before holding: a free local number beats a held number abroad', async t => {
  const h = harness()
  const held = h.create({ agentPhone: gb(50), customerPhone: gb(60) })
  t.equal(h.create({ agentPhone: us(51), customerPhone: us(61) }).proxyNumber, us(0), "the customer's region")
  t.equal(h.create({ agentPhone: us(52), customerPhone: ca(62) }).proxyNumber, us(0), "the agent's region when the customer's has none")
  // Neither party's region has numbers: the tenant's held number comes before a free one anywhere.
  const h2 = harness()
  const held2 = h2.create({ agentPhone: gb(50), customerPhone: gb(60) })
  t.equal(h2.create({ agentPhone: ca(51), customerPhone: ca(61) }).proxyNumber, held2.proxyNumber)
  t.equal(held.proxyNumber, gb(0))
})

t.test('a party already live on the number forces another number', async t => {
  const h = harness()
  const a = h.create({ agentPhone: AGENT, customerPhone: us(60) })
  const sameAgent = h.create({ agentPhone: AGENT, customerPhone: us(61) })
  const sameCustomer = h.create({ agentPhone: us(51), customerPhone: us(60) })
  const customerIsAgentThere = h.create({ agentPhone: us(61), customerPhone: us(62) })
  t.not(sameAgent.proxyNumber, a.proxyNumber)
  t.not(sameCustomer.proxyNumber, a.proxyNumber)
  t.not(customerIsAgentThere.proxyNumber, sameAgent.proxyNumber, 'a party of any role counts')
})

t.test('a number in use belongs to one tenant', async t => {
  const h = harness()
  const a = h.create({ tenantId: TENANT_A.id })
  const b = h.create({ tenantId: TENANT_B.id, agentPhone: us(70), customerPhone: us(71) })
  t.not(b.proxyNumber, a.proxyNumber)
  t.match(h.engine.route(a.proxyNumber, us(70), h.clock.now), { kind: 'no-session', tenant: { id: TENANT_A.id } })
})

t.test('exclude skips numbers (another node took them first)', async t => {
  const h = harness()
  const p = ok(h.engine.planCreate(input(), h.clock.now, new Set([us(0), us(1)])))
  t.equal(p.next.proxyNumber, us(2))
  h.commit(p)
  const q = ok(h.engine.planCreate(input({ agentPhone: us(51), customerPhone: us(61) }), h.clock.now, new Set([us(2)])))
  t.equal(q.next.proxyNumber, us(0), 'excluding the held number falls back to a free one')
})

t.test('pool-exhausted when no number fits', async t => {
  const h = harness({ numbers: [{ number: us(0), region: 'US', provider: 'telnyx' }, { number: gb(0), region: 'GB', provider: 'telnyx' }] })
  h.create({ agentPhone: AGENT, customerPhone: us(60) })
  h.create({ tenantId: TENANT_B.id, agentPhone: us(70), customerPhone: us(71) })
  t.same(h.engine.planCreate(input({ agentPhone: AGENT, customerPhone: us(61) }), h.clock.now), { ok: false, rejection: 'pool-exhausted' })
  t.same(h.engine.planCreate(input({ agentPhone: us(52), customerPhone: us(61) }), h.clock.now, new Set([us(0)])), { ok: false, rejection: 'pool-exhausted' })
  t.equal(ok(h.engine.planCreate(input({ agentPhone: us(52), customerPhone: us(61) }), h.clock.now)).next.proxyNumber, us(0))
})

t.test('never pool-exhausted while a held number fits, even past the round-robin tries', async t => {
  const count = RING_TRIES + 4
  const numbers = Array.from({ length: count }, (_, k) => ({ number: us(k), region: 'US', provider: 'telnyx' }))
  const h = harness({ numbers })
  // The agent takes part on every number: the tenant holds all of them, none is free.
  for (let k = 0; k < count; k++) h.create({ agentPhone: AGENT, customerPhone: us(100 + k) })
  t.same(h.engine.poolCounts(h.clock.now)[0], { region: 'US', provider: 'telnyx', total: count, available: 0, inUse: count, cooldown: 0 })
  // Only one number is allowed, and it lies beyond the first RING_TRIES of the ring.
  const target = us(RING_TRIES + 2)
  const exclude = new Set<string>(numbers.map(n => n.number).filter(n => n !== target))
  const p = ok(h.engine.planCreate(input({ agentPhone: us(60), customerPhone: us(61) }), h.clock.now, exclude))
  t.equal(p.next.proxyNumber, target)
  t.same(h.engine.planCreate(input({ agentPhone: AGENT, customerPhone: us(61) }), h.clock.now), { ok: false, rejection: 'pool-exhausted' })
})

t.test('addNumbers is idempotent and keeps the state of known numbers', async t => {
  const h = harness()
  const rec = h.create()
  h.engine.addNumbers([{ number: rec.proxyNumber, region: 'GB', provider: 'other' }, { number: us(3), region: 'US', provider: 'telnyx' }])
  t.same(h.engine.poolCounts(h.clock.now).find(c => c.region === 'US'), { region: 'US', provider: 'telnyx', total: 4, available: 3, inUse: 1, cooldown: 0 })
  t.throws(() => h.engine.addNumbers([{ number: 'not-a-number' as E164, region: 'US', provider: 'x' }]))
  h.clock.advance(MINUTE)
})
