// contract D10: inactivityTimeoutMinutes, with the simulated clock. The engine hands an idle
// ACTIVE session out once (idleDue) for the runner to end as POST /end would; a call or SMS only
// moves the session's activity mark, and the deadline is re-checked (re-armed) when it comes.
import t from 'tap'
import { MINUTE, T0, harness, ok } from './helpers.js'

t.test('an idle session is handed out once when its timeout passes, not before', async t => {
  const h = harness()
  const s = h.create({ inactivityTimeoutMinutes: 10 })
  t.equal(h.engine.get(s.id)?.inactivityTimeoutMinutes, 10)
  h.clock.advance(10 * MINUTE - 1)
  t.same(h.tick(), [])
  t.same(h.engine.idleDue(), [], 'not yet')
  h.clock.advance(1)
  t.same(h.tick(), [], 'nothing expires: inactivity ends, it does not expire')
  const idle = h.engine.idleDue()
  t.same(idle.map(r => [r.id, r.state, r.version]), [[s.id, 'ACTIVE', 1]])
  t.same(h.engine.idleDue(), [], 'drained')
  h.clock.advance(5 * MINUTE)
  h.tick()
  t.same(h.engine.idleDue(), [], 'handed out once while its end is being written')
  t.equal(h.engine.route(s.proxyNumber, s.agentPhone, h.clock.now).kind, 'connect', 'it routes meanwhile')
})

t.test('the end is POST /end: grace applies, then it expires', async t => {
  const h = harness()
  const s = h.create({ inactivityTimeoutMinutes: 10, gracePeriodMinutes: 5 })
  h.clock.advance(10 * MINUTE)
  h.tick()
  const [rec] = h.engine.idleDue()
  const plan = ok(h.engine.plan(rec!, { type: 'end' }, h.clock.now))
  h.commit(plan)
  t.match(h.engine.get(s.id), { state: 'GRACE_PERIOD', endedAt: T0 + 10 * MINUTE, expiresAt: T0 + 15 * MINUTE, version: 2 })
  h.clock.advance(20 * MINUTE)
  h.tick()
  t.same(h.engine.idleDue(), [], 'an ended session is not idle again')
  t.equal(h.engine.get(s.id), undefined)
  t.match(h.events.map(e => e.type), ['session.created', 'session.activated', 'session.expired'])
})

t.test('activity moves the deadline: re-armed lazily when the old one comes', async t => {
  const h = harness()
  const s = h.create({ inactivityTimeoutMinutes: 10 })
  const live = h.engine.live(s.id)!
  h.clock.advance(6 * MINUTE)
  live.noteActivity(h.clock.now) // an SMS at +6 min
  h.clock.advance(4 * MINUTE) // +10 min: the armed deadline
  h.tick()
  t.same(h.engine.idleDue(), [], 'activity since: re-armed, not handed out')
  h.clock.advance(5 * MINUTE) // +15 min
  live.noteCall(h.clock.now) // a call counts too
  h.clock.advance(10 * MINUTE - 1)
  h.tick()
  t.same(h.engine.idleDue(), [])
  h.clock.advance(1) // +25 min: 10 min after the call
  h.tick()
  t.same(h.engine.idleDue().map(r => r.id), [s.id])
})

t.test('resumeIdle: the store saw later activity, or could not be reached', async t => {
  const h = harness()
  const s = h.create({ inactivityTimeoutMinutes: 10 })
  h.clock.advance(10 * MINUTE)
  h.tick()
  t.equal(h.engine.idleDue().length, 1)
  h.engine.resumeIdle(s.id, T0 + 8 * MINUTE) // another node's call at +8 min
  h.clock.advance(8 * MINUTE - 1)
  h.tick()
  t.same(h.engine.idleDue(), [], 're-armed from the activity the store knew')
  h.clock.advance(1)
  h.tick()
  t.equal(h.engine.idleDue().length, 1)
  h.engine.resumeIdle(s.id, null) // no store: tried again at the next tick
  h.clock.advance(1_000)
  h.tick()
  t.equal(h.engine.idleDue().length, 1)
})

t.test('no timeout, a sooner hard timeout, and PATCH', async t => {
  const h = harness()
  const plain = h.create()
  const short = h.create({ inactivityTimeoutMinutes: 60, maxDurationMinutes: 30, agentPhone: '+12025550170' as never })
  t.equal(h.engine.get(plain.id)?.inactivityTimeoutMinutes, undefined, 'absent by default')
  h.clock.advance(30 * MINUTE)
  t.same(h.tick().map(r => r.id), [short.id], 'the hard timeout comes first and expires it')
  t.same(h.engine.idleDue(), [])

  ok(h.send(plain.id, { type: 'patch', inactivityTimeoutMinutes: 5 }))
  t.equal(h.engine.get(plain.id)?.inactivityTimeoutMinutes, 5)
  t.equal(h.engine.get(plain.id)?.version, 2)
  h.engine.live(plain.id)!.noteActivity(h.clock.now) // the runner restarts the clock on a PATCH that changed it
  h.clock.advance(5 * MINUTE)
  h.tick()
  t.same(h.engine.idleDue().map(r => r.id), [plain.id], '5 minutes after the PATCH')
  h.engine.resumeIdle(plain.id, null)
  ok(h.send(plain.id, { type: 'patch', inactivityTimeoutMinutes: null }))
  t.equal(h.engine.get(plain.id)?.inactivityTimeoutMinutes, undefined, 'null switches it off')
  h.clock.advance(60 * MINUTE)
  h.tick()
  t.same(h.engine.idleDue(), [])
  const same = h.send(plain.id, { type: 'patch', inactivityTimeoutMinutes: null })
  t.equal(ok(same).changed, false, 'an unchanged timeout is no change')
})

t.test('a loaded record keeps its timeout and its calls count as activity', async t => {
  const h = harness()
  const s = h.create({ inactivityTimeoutMinutes: 10 })
  const rec = { ...h.engine.get(s.id)!, version: 3 }
  h.engine.load(rec, { metadataJson: '{}', callCount: 1, lastCallAt: T0 + 7 * MINUTE })
  h.clock.advance(10 * MINUTE)
  h.tick()
  t.same(h.engine.idleDue(), [], 'the call another node recorded at +7 min re-armed it')
  h.clock.advance(7 * MINUTE)
  h.tick()
  t.same(h.engine.idleDue().map(r => [r.id, r.version]), [[s.id, 3]])
})
