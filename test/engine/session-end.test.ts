// contract 3.1 rows "ACTIVE → end → GRACE_PERIOD" and "EXPIRED or FAILED → end → rejected".
import t from 'tap'
import { step } from '../../engine/index.js'
import { MINUTE, T0, ok, record } from './helpers.js'

const now = T0 + 30 * MINUTE

t.test('ending an ACTIVE session starts the grace period', async t => {
  const s = record({ gracePeriodMinutes: 15 })
  const r = step(s, { type: 'end' }, now)
  if (!r.ok) return t.fail(r.rejection)
  t.equal(r.changed, true)
  t.same(r.events, [], 'entering the grace period emits nothing')
  t.same(r.next, { ...s, state: 'GRACE_PERIOD', endedAt: now, expiresAt: now + 15 * MINUTE, version: 2 })
  t.equal(s.state, 'ACTIVE', 'the input record is not mutated')
})

t.test('ending again in GRACE_PERIOD restarts the grace period from now', async t => {
  const first = step(record({ gracePeriodMinutes: 10 }), { type: 'end' }, now)
  if (!first.ok) return t.fail()
  const later = now + 4 * MINUTE
  const r = step(first.next, { type: 'end' }, later)
  if (!r.ok) return t.fail()
  t.match(r.next, { state: 'GRACE_PERIOD', endedAt: later, expiresAt: later + 10 * MINUTE, version: 3 })
})

t.test('grace 0 expires at once: expiresAt is now (contract D4)', async t => {
  const r = step(record({ gracePeriodMinutes: 0 }), { type: 'end' }, now)
  if (!r.ok) return t.fail()
  t.match(r.next, { state: 'GRACE_PERIOD', endedAt: now, expiresAt: now })
})

t.test('a PENDING session can be ended too (only EXPIRED and FAILED are refused)', async t => {
  const r = step(record({ state: 'PENDING' }), { type: 'end' }, now)
  if (!r.ok) return t.fail()
  t.equal(r.next.state, 'GRACE_PERIOD')
})

for (const state of ['EXPIRED', 'FAILED'] as const) {
  t.test(`ending an ${state} session is session-end-failed`, async t => {
    t.same(step(record({ state, expiredAt: T0 }), { type: 'end' }, now), { ok: false, rejection: 'session-end-failed' })
  })
}

t.test('ok() helper sanity', async t => {
  t.throws(() => ok({ ok: false, rejection: 'not-found' }))
})
