// contract D4: PATCH gracePeriodMinutes. In GRACE_PERIOD expiresAt = endedAt + grace (past → the
// next tick expires it); while ACTIVE only the stored value changes; on EXPIRED it is just stored.
import t from 'tap'
import { step } from '../../engine/index.js'
import { MINUTE, T0, record } from './helpers.js'

const endedAt = T0 + 30 * MINUTE

t.test('in GRACE_PERIOD the deadline moves to endedAt + the new grace', async t => {
  const s = record({ state: 'GRACE_PERIOD', endedAt, expiresAt: endedAt + 15 * MINUTE })
  const r = step(s, { type: 'patch', gracePeriodMinutes: 60 }, endedAt + MINUTE)
  if (!r.ok) return t.fail()
  t.equal(r.changed, true)
  t.same(r.events, [])
  t.same(r.next, { ...s, gracePeriodMinutes: 60, expiresAt: endedAt + 60 * MINUTE, version: 2 })
})

t.test('shortening the grace into the past leaves expiresAt in the past (the next tick expires it)', async t => {
  const s = record({ state: 'GRACE_PERIOD', endedAt, expiresAt: endedAt + 15 * MINUTE })
  const r = step(s, { type: 'patch', gracePeriodMinutes: 1 }, endedAt + 5 * MINUTE)
  if (!r.ok) return t.fail()
  t.match(r.next, { state: 'GRACE_PERIOD', gracePeriodMinutes: 1, expiresAt: endedAt + MINUTE })
})

t.test('while ACTIVE only the stored value changes; it applies when the session is ended', async t => {
  const s = record()
  const r = step(s, { type: 'patch', gracePeriodMinutes: 30 }, T0 + MINUTE)
  if (!r.ok) return t.fail()
  t.same(r.next, { ...s, gracePeriodMinutes: 30, version: 2 })
  const ended = step(r.next, { type: 'end' }, T0 + 2 * MINUTE)
  if (!ended.ok) return t.fail()
  t.equal(ended.next.expiresAt, T0 + 2 * MINUTE + 30 * MINUTE)
})

t.test('on an EXPIRED session the value is stored, nothing else moves', async t => {
  const s = record({ state: 'EXPIRED', endedAt, expiresAt: endedAt + 15 * MINUTE, expiredAt: endedAt + 15 * MINUTE, version: 3 })
  const r = step(s, { type: 'patch', gracePeriodMinutes: 5 }, endedAt + 20 * MINUTE)
  if (!r.ok) return t.fail()
  t.equal(r.changed, true)
  t.same(r.next, { ...s, gracePeriodMinutes: 5, version: 4 })
})

t.test('a patch without gracePeriodMinutes, or with the same value, changes nothing', async t => {
  const s = record()
  t.same(step(s, { type: 'patch' }, T0), { ok: true, next: s, events: [], changed: false })
  t.same(step(s, { type: 'patch', gracePeriodMinutes: 15 }, T0), { ok: true, next: s, events: [], changed: false })
})
