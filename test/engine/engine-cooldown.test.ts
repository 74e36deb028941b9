// contract 3.1 / 2.9: a released number cools down before it is available again; pool counts per
// region and provider always add up (available + inUse + cooldown = total).
import t from 'tap'
import { MINUTE, TENANT_B, gb, harness, input, ok, us } from './helpers.js'

const COOLDOWN = 15 * MINUTE

t.test('a released number is not available until cooldownMs after the release', async t => {
  const h = harness({ cooldownMs: COOLDOWN, numbers: [{ number: us(0), region: 'US', provider: 'telnyx' }] })
  const rec = h.create({ gracePeriodMinutes: 0 })
  t.same(h.engine.poolCounts(h.clock.now), [{ region: 'US', provider: 'telnyx', total: 1, available: 0, inUse: 1, cooldown: 0 }])
  h.send(rec.id, { type: 'end' })
  h.clock.advance(1000)
  const releasedAt = h.clock.now
  t.equal(h.tick().length, 1)
  t.same(h.engine.poolCounts(h.clock.now), [{ region: 'US', provider: 'telnyx', total: 1, available: 0, inUse: 0, cooldown: 1 }])
  // Even the tenant that held it, and a party who never used it, must wait.
  t.same(h.engine.planCreate(input({ agentPhone: us(80), customerPhone: us(81) }), h.clock.now), { ok: false, rejection: 'pool-exhausted' })
  h.clock.now = releasedAt + COOLDOWN - 1
  t.same(h.engine.planCreate(input({ tenantId: TENANT_B.id }), h.clock.now), { ok: false, rejection: 'pool-exhausted' })
  t.equal(h.engine.poolCounts(h.clock.now)[0]?.cooldown, 1)
  h.clock.now = releasedAt + COOLDOWN
  t.same(h.engine.poolCounts(h.clock.now), [{ region: 'US', provider: 'telnyx', total: 1, available: 1, inUse: 0, cooldown: 0 }])
  t.equal(ok(h.engine.planCreate(input({ tenantId: TENANT_B.id }), h.clock.now)).next.proxyNumber, us(0))
})

t.test('a number is released only when its last live session leaves', async t => {
  const h = harness({ cooldownMs: COOLDOWN })
  const a = h.create({ agentPhone: us(50), customerPhone: us(60), maxDurationMinutes: 10 })
  const b = h.create({ agentPhone: us(51), customerPhone: us(61), maxDurationMinutes: 20 })
  t.equal(a.proxyNumber, b.proxyNumber)
  h.clock.advance(10 * MINUTE)
  h.tick()
  t.same(h.engine.poolCounts(h.clock.now).find(c => c.region === 'US'), { region: 'US', provider: 'telnyx', total: 3, available: 2, inUse: 1, cooldown: 0 })
  h.clock.advance(10 * MINUTE)
  h.tick()
  t.same(h.engine.poolCounts(h.clock.now).find(c => c.region === 'US'), { region: 'US', provider: 'telnyx', total: 3, available: 2, inUse: 0, cooldown: 1 })
})

t.test('counts are per region and provider and always add up', async t => {
  const h = harness({
    cooldownMs: COOLDOWN,
    numbers: [
      { number: us(0), region: 'US', provider: 'telnyx' },
      { number: us(1), region: 'US', provider: 'backup' },
      { number: gb(0), region: 'GB', provider: 'telnyx' },
    ],
  })
  h.create({ agentPhone: gb(50), customerPhone: gb(60), maxDurationMinutes: 1 })
  h.create({ agentPhone: us(50), customerPhone: us(60) })
  h.create({ tenantId: TENANT_B.id, agentPhone: us(51), customerPhone: us(61) })
  h.clock.advance(MINUTE)
  h.tick()
  const counts = h.engine.poolCounts(h.clock.now)
  t.same(counts, [
    { region: 'US', provider: 'telnyx', total: 1, available: 0, inUse: 1, cooldown: 0 },
    { region: 'US', provider: 'backup', total: 1, available: 0, inUse: 1, cooldown: 0 },
    { region: 'GB', provider: 'telnyx', total: 1, available: 0, inUse: 0, cooldown: 1 },
  ])
  for (const c of counts) t.equal(c.available + c.inUse + c.cooldown, c.total)
})

t.test('the oldest release leaves cooldown first', async t => {
  const h = harness({ cooldownMs: COOLDOWN, numbers: [{ number: us(0), region: 'US', provider: 'telnyx' }, { number: us(1), region: 'US', provider: 'telnyx' }] })
  h.create({ agentPhone: us(50), customerPhone: us(60), maxDurationMinutes: 1 })
  h.create({ tenantId: TENANT_B.id, agentPhone: us(51), customerPhone: us(61), maxDurationMinutes: 2 })
  h.clock.advance(MINUTE)
  h.tick()
  h.clock.advance(MINUTE)
  h.tick()
  h.clock.advance(COOLDOWN - MINUTE)
  t.equal(h.engine.poolCounts(h.clock.now)[0]?.available, 1)
  t.equal(ok(h.engine.planCreate(input({ tenantId: TENANT_B.id, agentPhone: us(52), customerPhone: us(62) }), h.clock.now)).next.proxyNumber, us(0))
})
