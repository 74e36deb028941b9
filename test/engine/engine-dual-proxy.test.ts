// Dual-proxy sessions (docs/dual-proxy.md): each party has its own proxy number; pinned creates
// take bound numbers, which native allocation never picks.
import t from 'tap'
import type { CreateInput } from '../../engine/index.js'
import { AGENT, CUSTOMER, MINUTE, TENANT_A, TENANT_B, harness, input, us } from './helpers.js'

const PA = us(0)
const PB = us(1)
const pinned = { agentProxy: PA, customerProxy: PB }

function boundHarness() {
  const h = harness()
  h.engine.bindNumber(PA, TENANT_A.id)
  h.engine.bindNumber(PB, TENANT_A.id)
  return h
}

t.test('each party dials its own proxy and sees the other from it', async t => {
  const h = boundHarness()
  const s = h.create({ pinned })
  t.equal(s.proxyNumber, PA)
  t.equal(s.customerProxyNumber, PB)
  t.match(h.engine.route(PA, AGENT, h.clock.now), { kind: 'connect', direction: 'A_TO_B', to: CUSTOMER, callerId: PB })
  t.match(h.engine.route(PB, CUSTOMER, h.clock.now, 'sms'), { kind: 'connect', direction: 'B_TO_A', to: AGENT, callerId: PA })
  t.match(h.engine.route(PB, AGENT, h.clock.now), { kind: 'no-session' }, 'the agent is not a party on the customer proxy')
  t.match(h.engine.route(PA, CUSTOMER, h.clock.now), { kind: 'no-session' }, 'nor the customer on the agent proxy')
  t.same(h.engine.get(s.id), s, 'memory gives back the record, customerProxyNumber included')
})

t.test('the same number for both parties is a native session', async t => {
  const h = boundHarness()
  const s = h.create({ pinned: { agentProxy: PA, customerProxy: PA } })
  t.equal(s.customerProxyNumber, undefined)
  t.match(h.engine.route(PA, CUSTOMER, h.clock.now), { kind: 'connect', to: AGENT, callerId: PA })
})

t.test('the overlap rule holds per (proxy, party)', async t => {
  const h = boundHarness()
  h.create({ pinned })
  t.match(h.engine.planCreate({ ...inputOf(), pinned, customerPhone: us(70) }, h.clock.now), { ok: false, rejection: 'proxy-in-use' }, 'agent live on PA')
  t.match(h.engine.planCreate({ ...inputOf(), pinned, agentPhone: us(71) }, h.clock.now), { ok: false, rejection: 'proxy-in-use' }, 'customer live on PB')
  // The customer on PA (as another session's customer) is a different key: allowed.
  const other = h.create({ pinned: { agentProxy: PB, customerProxy: PA }, agentPhone: us(72) })
  t.match(h.engine.route(PA, CUSTOMER, h.clock.now), { kind: 'connect', sessionId: other.id, to: us(72), callerId: PB })
})

t.test('a pinned number must be bound to the tenant or held by it', async t => {
  const h = harness()
  t.match(h.engine.planCreate({ ...inputOf(), pinned }, h.clock.now), { ok: false, rejection: 'proxy-unavailable' }, 'free, unbound')
  h.engine.bindNumber(PA, TENANT_B.id)
  h.engine.bindNumber(PB, TENANT_A.id)
  t.match(h.engine.planCreate({ ...inputOf(), pinned }, h.clock.now), { ok: false, rejection: 'proxy-unavailable' }, 'bound to another tenant')
  t.match(h.engine.planCreate({ ...inputOf(), pinned: { agentProxy: us(99), customerProxy: PB } }, h.clock.now), { ok: false, rejection: 'proxy-unavailable' }, 'unknown number')
  const held = h.create() // native: takes us(0)? no, bound numbers are skipped
  t.equal(held.proxyNumber, us(2), 'native allocation skips both bound numbers')
  t.ok(h.engine.planCreate({ ...inputOf(), pinned: { agentProxy: us(2), customerProxy: PB }, agentPhone: us(73), customerPhone: us(74) }, h.clock.now).ok, 'a number the tenant holds natively')
})

t.test('bound numbers are never allocated natively, for any tenant, and unbinding frees them', async t => {
  const h = harness({ numbers: [{ number: PA, region: 'US', provider: 'telnyx' }, { number: PB, region: 'US', provider: 'telnyx' }] })
  h.engine.bindNumber(PA, TENANT_A.id)
  h.engine.bindNumber(PB, TENANT_B.id)
  t.match(h.engine.planCreate(inputOf(), h.clock.now), { ok: false, rejection: 'pool-exhausted' })
  t.match(h.engine.planCreate({ ...inputOf(), tenantId: TENANT_B.id }, h.clock.now), { ok: false, rejection: 'pool-exhausted' })
  t.match(h.engine.poolCounts(h.clock.now), [{ total: 0, available: 0, inUse: 0 }], 'outside the native pool counts')
  t.match(h.engine.planCreate(inputOf({ preferProxy: PA }), h.clock.now), { ok: false, rejection: 'pool-exhausted' }, 'not even as a sticky proxy')
  h.engine.bindNumber(PA, null)
  t.equal(h.create().proxyNumber, PA)
  t.match(h.engine.poolCounts(h.clock.now), [{ total: 1, available: 0, inUse: 1 }])
})

t.test('both numbers are held while live and released at expiry', async t => {
  const h = boundHarness()
  const s = h.create({ pinned, maxDurationMinutes: 10 })
  t.equal(h.engine.liveCount(TENANT_A.id), 1, 'one session against the quota')
  h.clock.advance(10 * MINUTE)
  t.same(h.tick().map(r => r.id), [s.id])
  t.equal(h.engine.liveCount(TENANT_A.id), 0)
  t.match(h.engine.route(PA, AGENT, h.clock.now), { kind: 'no-session', tenant: { id: TENANT_A.id } })
  t.match(h.engine.route(PB, CUSTOMER, h.clock.now), { kind: 'no-session', tenant: { id: TENANT_A.id } })
  // Both numbers are free again for the same parties, without cooldown (bound: the tenant's own).
  t.ok(h.engine.planCreate({ ...inputOf(), pinned }, h.clock.now).ok)
  h.engine.bindNumber(PA, null)
  h.engine.bindNumber(PB, null)
  t.match(h.engine.poolCounts(h.clock.now), [{ region: 'US', total: 3, inUse: 0, cooldown: 2 }], 'released into cooldown once unbound')
})

t.test('a swap keeps the customer on the customer proxy', async t => {
  const h = boundHarness()
  const s = h.create({ pinned })
  h.create({ pinned: { agentProxy: PA, customerProxy: PB }, agentPhone: us(80), customerPhone: us(81) })
  t.match(h.send(s.id, { type: 'swap-target', customerPhone: us(81) }), { ok: false, rejection: 'target-conflict' }, 'us(81) is live on PB')
  t.ok(h.send(s.id, { type: 'swap-target', customerPhone: us(82) }).ok)
  t.match(h.engine.route(PB, us(82), h.clock.now), { kind: 'connect', sessionId: s.id, to: AGENT, callerId: PA })
  t.match(h.engine.route(PB, CUSTOMER, h.clock.now), { kind: 'no-session' })
  t.match(h.engine.route(PA, AGENT, h.clock.now), { kind: 'connect', to: us(82), callerId: PB })
})

t.test('load() of a dual-proxy record (boot, another node) routes and holds both numbers', async t => {
  const a = boundHarness()
  const s = a.create({ pinned })
  const b = boundHarness()
  b.engine.load(s)
  t.match(b.engine.route(PB, CUSTOMER, b.clock.now), { kind: 'connect', sessionId: s.id, callerId: PA })
  b.engine.load({ ...s, state: 'EXPIRED', expiredAt: b.clock.now, version: s.version + 1 })
  t.match(b.engine.route(PA, AGENT, b.clock.now), { kind: 'no-session' })
  t.equal(b.engine.liveCount(TENANT_A.id), 0)
})

function inputOf(over: Partial<CreateInput> = {}): CreateInput {
  return input(over)
}
