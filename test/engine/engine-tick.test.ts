// tick(): expires every live session due at now, in one pass over the deadline heap; re-arming on
// end and patch moves the deadline; expiry releases the number and counts the quota down.
import t from 'tap'
import { MINUTE, TENANT_A, harness, us } from './helpers.js'

t.test('tick expires exactly the due sessions and returns their EXPIRED records', async t => {
  const h = harness()
  const short = h.create({ agentPhone: us(50), customerPhone: us(60), maxDurationMinutes: 10 })
  const long = h.create({ agentPhone: us(51), customerPhone: us(61), maxDurationMinutes: 20 })
  h.events.length = 0
  h.clock.advance(10 * MINUTE - 1)
  t.same(h.tick(), [])
  h.clock.advance(1)
  const out = h.tick()
  t.same(out, [{ ...short, state: 'EXPIRED', expiredAt: h.clock.now, version: 2 }])
  t.same(h.events, [{ type: 'session.expired', at: h.clock.now, sessionId: short.id, tenantId: short.tenantId, proxyNumber: short.proxyNumber, state: 'EXPIRED' }])
  t.same(h.tick(), [], 'nothing expires twice')
  t.ok(h.engine.get(long.id))
  t.equal(h.engine.get(short.id), undefined)
})

t.test('a late tick expires everything overdue, earliest deadline first, with expiredAt = now', async t => {
  const h = harness()
  const ids = [30, 10, 20].map((m, k) => h.create({ agentPhone: us(50 + k), customerPhone: us(60 + k), maxDurationMinutes: m }).id)
  h.clock.advance(60 * MINUTE)
  const out = h.tick()
  t.same(out.map(r => r.id), [ids[1], ids[2], ids[0]])
  for (const r of out) t.equal(r.expiredAt, h.clock.now)
  t.equal(h.engine.liveCount(TENANT_A.id), 0)
})

t.test('end re-arms earlier and patch re-arms later', async t => {
  const h = harness()
  const s = h.create({ gracePeriodMinutes: 5, maxDurationMinutes: 120 })
  h.send(s.id, { type: 'end' })
  h.send(s.id, { type: 'patch', gracePeriodMinutes: 30 })
  h.clock.advance(29 * MINUTE)
  t.same(h.tick(), [])
  h.clock.advance(MINUTE)
  t.equal(h.tick().length, 1)
})

t.test('grace 0 expires at the next tick; a grace shortened into the past too', async t => {
  const h = harness()
  const a = h.create({ agentPhone: us(50), customerPhone: us(60), gracePeriodMinutes: 0 })
  const b = h.create({ agentPhone: us(51), customerPhone: us(61), gracePeriodMinutes: 30 })
  h.send(a.id, { type: 'end' })
  h.send(b.id, { type: 'end' })
  h.clock.advance(10 * MINUTE)
  h.send(b.id, { type: 'patch', gracePeriodMinutes: 5 })
  t.match(h.engine.route(b.proxyNumber, us(61), h.clock.now), { kind: 'no-session' }, 'unroutable at once')
  const out = h.tick()
  t.same(out.map(r => r.id).sort(), [a.id, b.id].sort())
  t.match(out.find(r => r.id === b.id), { expiresAt: b.createdAt + 5 * MINUTE, expiredAt: h.clock.now, version: 4 })
})

t.test('a patch while ACTIVE does not move the deadline', async t => {
  const h = harness()
  const s = h.create({ maxDurationMinutes: 10 })
  h.send(s.id, { type: 'patch', gracePeriodMinutes: 60 })
  h.clock.advance(10 * MINUTE)
  t.equal(h.tick().length, 1)
})

t.test('max bounds one tick; the next call goes on where it stopped', async t => {
  const h = harness()
  const ids = [1, 2, 3].map(k => h.create({ agentPhone: us(50 + k), customerPhone: us(60 + k), maxDurationMinutes: k }).id)
  h.clock.advance(10 * MINUTE)
  t.same(h.engine.tick(h.clock.now, 2).map(r => r.id), ids.slice(0, 2))
  t.same(h.engine.tick(h.clock.now, 2).map(r => r.id), ids.slice(2))
  t.same(h.engine.tick(h.clock.now, 2), [])
})
