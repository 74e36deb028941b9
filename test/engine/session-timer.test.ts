// contract 3.1 rows "GRACE_PERIOD → grace elapses → EXPIRED" and "ACTIVE → hard timeout → EXPIRED".
import t from 'tap'
import { step } from '../../engine/index.js'
import { MINUTE, T0, record } from './helpers.js'

t.test('hard timeout: an ACTIVE session at expiresAt expires', async t => {
  const s = record()
  const at = s.expiresAt
  const r = step(s, { type: 'timer-fired' }, at)
  if (!r.ok) return t.fail()
  t.same(r.next, { ...s, state: 'EXPIRED', expiredAt: at, version: 2 })
  t.same(r.events, [{ type: 'session.expired', at, sessionId: s.id, tenantId: s.tenantId, proxyNumber: s.proxyNumber, state: 'EXPIRED' }])
})

t.test('grace elapsed: a GRACE_PERIOD session past expiresAt expires with expiredAt = now', async t => {
  const s = record({ state: 'GRACE_PERIOD', endedAt: T0, expiresAt: T0 + 15 * MINUTE, version: 2 })
  const late = T0 + 15 * MINUTE + 700
  const r = step(s, { type: 'timer-fired' }, late)
  if (!r.ok) return t.fail()
  t.match(r.next, { state: 'EXPIRED', expiredAt: late, endedAt: T0, version: 3 })
})

t.test('a timer firing early, or on a session already over, changes nothing', async t => {
  const s = record()
  t.same(step(s, { type: 'timer-fired' }, s.expiresAt - 1), { ok: true, next: s, events: [], changed: false })
  const done = record({ state: 'EXPIRED', expiredAt: T0 })
  t.same(step(done, { type: 'timer-fired' }, T0 + 999 * MINUTE), { ok: true, next: done, events: [], changed: false })
})
