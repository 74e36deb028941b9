// contract 3.1 row "(none) → POST /v1/sessions → ACTIVE": planCreate is pure, commit applies and emits
// session.created then session.activated (contract 6).
import t from 'tap'
import { UnknownTenantError, type TenantId } from '../../engine/index.js'
import { AGENT, CUSTOMER, MINUTE, TENANT_A, harness, input, ok, us } from './helpers.js'

t.test('a create plan is an ACTIVE version-1 session with both events, and changes nothing', async t => {
  const h = harness()
  const inp = input({ maxDurationMinutes: 90, gracePeriodMinutes: 5, directionMode: 'A_TO_B_ONLY', recordingEnabled: true })
  const before = h.engine.poolCounts(h.clock.now)
  const plan = ok(h.engine.planCreate(inp, h.clock.now))
  t.same(plan.next, {
    ...inp,
    proxyNumber: us(0),
    state: 'ACTIVE',
    createdAt: h.clock.now,
    activatedAt: h.clock.now,
    expiresAt: h.clock.now + 90 * MINUTE,
    endedAt: null,
    expiredAt: null,
    version: 1,
  })
  t.equal(plan.prev, null)
  t.equal(plan.changed, true)
  const base = { at: h.clock.now, sessionId: inp.id, tenantId: inp.tenantId, proxyNumber: us(0), state: 'ACTIVE' }
  t.same(plan.events, [{ type: 'session.created', ...base }, { type: 'session.activated', ...base }])
  t.same(h.events, [], 'planning emits nothing')
  t.equal(h.engine.size(), 0, 'planning does not touch memory')
  t.equal(h.engine.liveCount(TENANT_A.id), 0)
  t.same(h.engine.poolCounts(h.clock.now), before)
  t.same(ok(h.engine.planCreate(inp, h.clock.now)).next, plan.next, 'planning again gives the same answer')
})

t.test('commit puts the session in memory and emits created then activated', async t => {
  const h = harness()
  const plan = ok(h.engine.planCreate(input(), h.clock.now))
  h.commit(plan)
  t.same(h.events, plan.events)
  t.same(h.engine.get(plan.next.id), plan.next)
  t.equal(h.engine.size(), 1)
  t.equal(h.engine.liveCount(TENANT_A.id), 1)
  t.match(h.engine.route(plan.next.proxyNumber, AGENT, h.clock.now), { kind: 'connect', to: CUSTOMER })
})

t.test('events carry no phone number of a party', async t => {
  const h = harness()
  const rec = h.create()
  h.clock.advance(MINUTE)
  h.send(rec.id, { type: 'swap-target', customerPhone: us(99) })
  h.send(rec.id, { type: 'end' })
  h.clock.advance(15 * MINUTE)
  h.tick()
  t.same(h.events.map(e => e.type), ['session.created', 'session.activated', 'session.target_swapped', 'session.expired'])
  for (const e of h.events) {
    t.same(Object.keys(e).sort(), ['at', 'proxyNumber', 'sessionId', 'state', 'tenantId', 'type'])
    const json = JSON.stringify(e)
    for (const party of [AGENT, CUSTOMER, us(99)]) t.notOk(json.includes(party), `${e.type} has no party number`)
  }
})

t.test('an unknown tenant is a programming error', async t => {
  const h = harness()
  t.throws(() => h.engine.planCreate(input({ tenantId: 'nope' as TenantId }), h.clock.now), UnknownTenantError)
})

t.test('upsertTenant replaces the routing config of a known tenant', async t => {
  const h = harness()
  h.create()
  h.engine.upsertTenant({ ...TENANT_A, tier: 'GROWTH' })
  t.equal(h.engine.liveCount(TENANT_A.id), 1, 'its live sessions stay counted')
})
