// A caller without a routable session on a known proxy gets no-session with the tenant that holds
// (or last held) the number, to apply its expiredCallBehavior (contract 3.1); an unknown proxy is
// unknown-proxy (contract D5: <Reject/>).
import t from 'tap'
import { AGENT, CUSTOMER, MINUTE, TENANT_A, TENANT_B, T0, harness, record, tenant, us } from './helpers.js'

t.test('expired through the grace period: no-session from expiresAt on, before and after the tick', async t => {
  const h = harness()
  const s = h.create({ gracePeriodMinutes: 5 })
  h.clock.advance(MINUTE)
  h.send(s.id, { type: 'end' })
  h.clock.advance(5 * MINUTE - 1)
  t.match(h.engine.route(s.proxyNumber, CUSTOMER, h.clock.now), { kind: 'connect' }, 'still routes in the grace period')
  h.clock.advance(1)
  t.same(h.engine.route(s.proxyNumber, CUSTOMER, h.clock.now), { kind: 'no-session', proxy: s.proxyNumber, tenant: TENANT_A }, 'not routable at expiresAt even before the tick')
  h.tick()
  t.same(h.engine.route(s.proxyNumber, AGENT, h.clock.now), { kind: 'no-session', proxy: s.proxyNumber, tenant: TENANT_A }, 'the last holder answers after release')
})

t.test('expired through the hard timeout', async t => {
  const h = harness()
  const s = h.create({ maxDurationMinutes: 30 })
  h.clock.advance(30 * MINUTE)
  t.match(h.engine.route(s.proxyNumber, AGENT, h.clock.now), { kind: 'no-session' })
  t.equal(h.tick().length, 1)
  t.match(h.engine.route(s.proxyNumber, AGENT, h.clock.now), { kind: 'no-session', tenant: { id: TENANT_A.id } })
})

t.test('a swapped-away customer gets no-session at once; the new one connects', async t => {
  const h = harness()
  const s = h.create()
  h.send(s.id, { type: 'swap-target', customerPhone: us(70) })
  t.match(h.engine.route(s.proxyNumber, CUSTOMER, h.clock.now), { kind: 'no-session', tenant: { id: TENANT_A.id } })
  t.match(h.engine.route(s.proxyNumber, us(70), h.clock.now), { kind: 'connect', direction: 'B_TO_A', to: AGENT })
  t.match(h.engine.route(s.proxyNumber, AGENT, h.clock.now), { kind: 'connect', to: us(70) }, 'the agent now reaches the new customer')
})

t.test('a stranger on a number in use gets no-session with the holding tenant', async t => {
  const h = harness()
  const s = h.create()
  t.same(h.engine.route(s.proxyNumber, us(99), h.clock.now), { kind: 'no-session', proxy: s.proxyNumber, tenant: TENANT_A })
  t.same(h.engine.route(s.proxyNumber, 'anonymous', h.clock.now), { kind: 'no-session', proxy: s.proxyNumber, tenant: TENANT_A }, 'a caller id that is no number')
})

t.test('a pool number never used answers with tenant null; a number outside the pool is unknown-proxy', async t => {
  const h = harness()
  t.same(h.engine.route(us(2), AGENT, h.clock.now), { kind: 'no-session', proxy: us(2), tenant: null })
  t.same(h.engine.route(us(9), AGENT, h.clock.now), { kind: 'unknown-proxy' })
  t.same(h.engine.route('+0123456789', AGENT, h.clock.now), { kind: 'unknown-proxy' })
})

t.test('the tenant of no-session follows config changes and the latest holder', async t => {
  const h = harness({ numbers: [{ number: us(0), region: 'US', provider: 'telnyx' }], cooldownMs: MINUTE })
  const s = h.create({ maxDurationMinutes: 1 })
  h.clock.advance(MINUTE)
  h.tick()
  const changed = tenant(TENANT_A.id, { expiredCallBehavior: 'REDIRECT_SUPPORT', supportPhone: us(90) })
  h.engine.upsertTenant(changed)
  t.same(h.engine.route(s.proxyNumber, AGENT, h.clock.now), { kind: 'no-session', proxy: s.proxyNumber, tenant: changed })
  h.clock.advance(MINUTE)
  h.create({ tenantId: TENANT_B.id, agentPhone: us(80), customerPhone: us(81) })
  t.same(h.engine.route(s.proxyNumber, AGENT, h.clock.now), { kind: 'no-session', proxy: s.proxyNumber, tenant: TENANT_B }, 'the number now belongs to B')
})

t.test('a PENDING session holds its parties but does not route', async t => {
  const h = harness()
  const rec = record({ state: 'PENDING', createdAt: T0, expiresAt: T0 + 60 * MINUTE })
  h.engine.load(rec)
  t.match(h.engine.route(rec.proxyNumber, AGENT, h.clock.now), { kind: 'no-session', tenant: { id: TENANT_A.id } })
  t.equal(h.engine.liveCount(TENANT_A.id), 1)
})
