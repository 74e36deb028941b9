// PATCH /v1/sessions/:id/target through the engine (contract 4.2): the overlap check needs the index,
// the swap unwires the previous customer at once (contract 3.1), the event fires at commit only.
import t from 'tap'
import { AGENT, CUSTOMER, MINUTE, harness, ok, record, us } from './helpers.js'

t.test('a target already in another live session on the same proxy is target-conflict', async t => {
  const h = harness()
  const a = h.create({ agentPhone: us(50), customerPhone: us(60) })
  const b = h.create({ agentPhone: us(51), customerPhone: us(61) })
  t.equal(a.proxyNumber, b.proxyNumber)
  const rec = h.engine.get(a.id)!
  t.same(h.engine.plan(rec, { type: 'swap-target', customerPhone: us(61) }, h.clock.now), { ok: false, rejection: 'target-conflict' }, 'as customer there')
  t.same(h.engine.plan(rec, { type: 'swap-target', customerPhone: us(51) }, h.clock.now), { ok: false, rejection: 'target-conflict' }, 'as agent there')
})

t.test('a target live on another proxy only is fine', async t => {
  const h = harness()
  const a = h.create({ agentPhone: us(50), customerPhone: us(60) })
  const elsewhere = h.create({ agentPhone: us(50), customerPhone: us(61) })
  t.not(elsewhere.proxyNumber, a.proxyNumber)
  const plan = ok(h.engine.plan(h.engine.get(a.id)!, { type: 'swap-target', customerPhone: us(61) }, h.clock.now))
  t.equal(plan.next.customerPhone, us(61))
})

t.test('commit unwires the old customer, wires the new one, and emits the event then', async t => {
  const h = harness()
  const s = h.create()
  h.events.length = 0
  h.clock.advance(MINUTE)
  const plan = ok(h.engine.plan(h.engine.get(s.id)!, { type: 'swap-target', customerPhone: us(70) }, h.clock.now))
  t.same(h.events, [], 'no event at plan time')
  t.match(h.engine.route(s.proxyNumber, CUSTOMER, h.clock.now), { kind: 'connect' }, 'nothing moves before commit')
  h.commit(plan)
  t.same(h.events, [{ type: 'session.target_swapped', at: h.clock.now, sessionId: s.id, tenantId: s.tenantId, proxyNumber: s.proxyNumber, state: 'ACTIVE' }])
  t.match(h.engine.route(s.proxyNumber, CUSTOMER, h.clock.now), { kind: 'no-session' })
  t.match(h.engine.get(s.id), { customerPhone: us(70), version: 2, expiresAt: s.expiresAt, directionMode: s.directionMode })
  // The old customer is free on this proxy again: a new session may use them there.
  const again = h.create({ agentPhone: us(80), customerPhone: CUSTOMER })
  t.equal(again.proxyNumber, s.proxyNumber)
})

t.test('swapping to the current target is ok and unchanged: no version, no event', async t => {
  const h = harness()
  const s = h.create()
  h.events.length = 0
  const plan = ok(h.engine.plan(h.engine.get(s.id)!, { type: 'swap-target', customerPhone: CUSTOMER }, h.clock.now))
  t.equal(plan.changed, false)
  t.equal(plan.next.version, 1)
  h.commit(plan)
  t.same(h.events, [])
})

t.test('the agent number is invalid-target; an ended session is target-conflict, even out of memory', async t => {
  const h = harness()
  const s = h.create()
  t.same(h.engine.plan(h.engine.get(s.id)!, { type: 'swap-target', customerPhone: AGENT }, h.clock.now), { ok: false, rejection: 'invalid-target' })
  const expired = record({ state: 'EXPIRED', expiredAt: h.clock.now, version: 4 })
  t.same(h.engine.plan(expired, { type: 'swap-target', customerPhone: us(70) }, h.clock.now), { ok: false, rejection: 'target-conflict' })
})

t.test('a swap in the grace period keeps state and deadline', async t => {
  const h = harness()
  const s = h.create()
  h.send(s.id, { type: 'end' })
  const ended = h.engine.get(s.id)!
  ok(h.send(s.id, { type: 'swap-target', customerPhone: us(70) }))
  t.match(h.engine.get(s.id), { state: 'GRACE_PERIOD', expiresAt: ended.expiresAt, endedAt: ended.endedAt, customerPhone: us(70) })
  t.match(h.engine.route(s.proxyNumber, us(70), h.clock.now), { kind: 'connect' })
})
