// contract 8.2: the concurrent-session quota counts PENDING, ACTIVE and GRACE_PERIOD sessions; it rises
// at creation and falls at expiry, per tenant.
import t from 'tap'
import { TIER_LIMITS } from '../../engine/index.js'
import { MINUTE, TENANT_A, TENANT_B, harness, input, ok, us } from './helpers.js'

const limits = { ...TIER_LIMITS, STARTER: { requestsPerMinute: 100, concurrentSessions: 2 } }

t.test('the quota counts up at create, holds through the grace period, and counts down at expiry', async t => {
  const h = harness({ limits })
  const a = h.create({ agentPhone: us(50), customerPhone: us(60), gracePeriodMinutes: 10 })
  t.equal(h.engine.liveCount(TENANT_A.id), 1)
  h.create({ agentPhone: us(51), customerPhone: us(61) })
  t.equal(h.engine.liveCount(TENANT_A.id), 2)
  t.same(h.engine.planCreate(input({ agentPhone: us(52), customerPhone: us(62) }), h.clock.now), { ok: false, rejection: 'tier-session-limit' })

  h.send(a.id, { type: 'end' })
  t.equal(h.engine.liveCount(TENANT_A.id), 2, 'a session in its grace period still counts')
  t.same(h.engine.planCreate(input({ agentPhone: us(52), customerPhone: us(62) }), h.clock.now), { ok: false, rejection: 'tier-session-limit' })

  h.clock.advance(10 * MINUTE)
  t.equal(h.tick().length, 1)
  t.equal(h.engine.liveCount(TENANT_A.id), 1, 'expiry frees a slot')
  ok(h.engine.planCreate(input({ agentPhone: us(52), customerPhone: us(62) }), h.clock.now))
})

t.test('the quota is per tenant and follows the tier', async t => {
  const h = harness({ limits })
  h.create({ agentPhone: us(50), customerPhone: us(60) })
  h.create({ agentPhone: us(51), customerPhone: us(61) })
  t.equal(h.engine.liveCount(TENANT_B.id), 0)
  ok(h.engine.planCreate(input({ tenantId: TENANT_B.id, agentPhone: us(70), customerPhone: us(71) }), h.clock.now))
  h.engine.upsertTenant({ ...TENANT_A, tier: 'GROWTH' })
  // A tier change applies at once.
  ok(h.engine.planCreate(input({ agentPhone: us(52), customerPhone: us(62) }), h.clock.now))
})

t.test('a tenant never seen counts zero', async t => {
  t.equal(harness().engine.liveCount('nobody'), 0)
})
