// commit(): applies a persisted plan (true), whose events the caller then announces; idempotent
// per version; stale plans are ignored, including live versions of a session that already left
// memory.
import t from 'tap'
import { IndexConflictError } from '../../engine/index.js'
import { MINUTE, TENANT_A, TENANT_B, harness, input, ok, us } from './helpers.js'

t.test('committing the same plan twice applies (and announces) once', async t => {
  const h = harness()
  const plan = ok(h.engine.planCreate(input(), h.clock.now))
  h.commit(plan)
  h.commit(plan)
  t.equal(h.events.length, 2)
  t.equal(h.engine.liveCount(TENANT_A.id), 1)
  const end = ok(h.engine.plan(h.engine.get(plan.next.id)!, { type: 'end' }, h.clock.now))
  h.commit(end)
  h.commit(end)
  t.equal(h.engine.get(plan.next.id)?.version, 2)
})

t.test('a plan not newer than the held version is ignored', async t => {
  const h = harness()
  const s = h.create()
  const v1 = h.engine.get(s.id)!
  const swap = ok(h.engine.plan(v1, { type: 'swap-target', customerPhone: us(70) }, h.clock.now))
  const end = ok(h.engine.plan(v1, { type: 'end' }, h.clock.now)) // also version 2, planned from v1
  h.commit(swap)
  h.events.length = 0
  h.commit(end)
  t.match(h.engine.get(s.id), { state: 'ACTIVE', customerPhone: us(70), version: 2 })
  t.same(h.events, [])
})

t.test('a live plan committed after tick() expired the session does not bring it back', async t => {
  const h = harness()
  const s = h.create({ maxDurationMinutes: 10 })
  h.clock.advance(9 * MINUTE)
  const end = ok(h.engine.plan(h.engine.get(s.id)!, { type: 'end' }, h.clock.now)) // version 2
  h.clock.advance(MINUTE)
  const expired = h.tick() // version 2 as well: whichever the store accepts first wins
  t.equal(expired.length, 1)
  h.events.length = 0
  h.commit(end)
  t.equal(h.engine.get(s.id), undefined)
  t.equal(h.engine.size(), 0)
  t.equal(h.engine.liveCount(TENANT_A.id), 0)
  t.same(h.events, [])
})

t.test('a non-live record commits out of memory and emits its events once', async t => {
  const h = harness()
  const s = h.create()
  h.events.length = 0
  const expiredRec = { ...h.engine.get(s.id)!, state: 'EXPIRED' as const, expiredAt: h.clock.now, version: 2 }
  const plan = { ok: true as const, prev: null, next: expiredRec, changed: true, events: [] }
  h.commit(plan)
  t.equal(h.engine.size(), 0)
  t.match(h.engine.route(s.proxyNumber, s.agentPhone, h.clock.now), { kind: 'no-session' })
  const patch = ok(h.engine.plan(expiredRec, { type: 'patch', gracePeriodMinutes: 1 }, h.clock.now))
  h.commit(patch)
  h.commit(patch)
  t.equal(h.engine.size(), 0)
})

t.test('two creates planned side by side for one agent: the second commit is refused whole', async t => {
  const h = harness()
  const first = ok(h.engine.planCreate(input({ customerPhone: us(60) }), h.clock.now))
  const second = ok(h.engine.planCreate(input({ customerPhone: us(61) }), h.clock.now))
  t.equal(first.next.proxyNumber, second.next.proxyNumber, 'both plans saw the same free number')
  h.commit(first)
  h.events.length = 0
  t.throws(() => h.commit(second), IndexConflictError)
  try {
    h.commit(second)
  } catch (err) {
    t.match((err as Error).message, new RegExp(`${second.next.id}.*${first.next.id}`), 'names both session ids')
    t.notMatch((err as Error).message, /\+\d{7,15}/, 'and no phone number')
  }
  t.equal(h.engine.size(), 1)
  t.same(h.events, [])
  t.match(h.engine.route(first.next.proxyNumber, us(60), h.clock.now), { kind: 'connect', sessionId: first.next.id })
})

t.test('a commit onto a number another tenant holds is refused', async t => {
  const h = harness({ numbers: [{ number: us(0), region: 'US', provider: 'telnyx' }] })
  const a = ok(h.engine.planCreate(input(), h.clock.now))
  const b = ok(h.engine.planCreate(input({ tenantId: TENANT_B.id, agentPhone: us(80), customerPhone: us(81) }), h.clock.now))
  t.equal(b.next.proxyNumber, a.next.proxyNumber)
  h.commit(a)
  t.throws(() => h.commit(b), IndexConflictError)
  t.equal(h.engine.size(), 1)
  t.equal(h.engine.liveCount(TENANT_B.id), 0)
})
