// contract 3.1 row "ACTIVE or GRACE_PERIOD → PATCH /target → same state", contract 4.2 rejections, at the
// level of step() (the overlap with other sessions is Engine.plan's: engine-swap.test.ts).
import t from 'tap'
import { step } from '../../engine/index.js'
import { AGENT, CUSTOMER, MINUTE, T0, record, us } from './helpers.js'

const NEW = us(70)
const now = T0 + 5 * MINUTE

for (const state of ['ACTIVE', 'GRACE_PERIOD'] as const) {
  t.test(`swap in ${state} replaces party B and nothing else`, async t => {
    const s = record({ state, ...(state === 'GRACE_PERIOD' ? { endedAt: T0, expiresAt: T0 + 15 * MINUTE } : {}) })
    const r = step(s, { type: 'swap-target', customerPhone: NEW }, now)
    if (!r.ok) return t.fail(r.rejection)
    t.equal(r.changed, true)
    t.same(r.next, { ...s, customerPhone: NEW, version: s.version + 1 })
    t.same(r.events, [{ type: 'session.target_swapped', at: now, sessionId: s.id, tenantId: s.tenantId, proxyNumber: s.proxyNumber, state }])
  })
}

t.test('swapping to the current target is idempotent: no change, no event', async t => {
  const s = record()
  t.same(step(s, { type: 'swap-target', customerPhone: CUSTOMER }, now), { ok: true, next: s, events: [], changed: false })
})

t.test('swapping to the agent number is invalid-target', async t => {
  t.same(step(record(), { type: 'swap-target', customerPhone: AGENT }, now), { ok: false, rejection: 'invalid-target' })
})

for (const state of ['EXPIRED', 'FAILED', 'PENDING'] as const) {
  t.test(`swap in ${state} is target-conflict`, async t => {
    t.same(step(record({ state }), { type: 'swap-target', customerPhone: NEW }, now), { ok: false, rejection: 'target-conflict' })
    // The state check comes first: even the agent's number is a conflict here.
    t.same(step(record({ state }), { type: 'swap-target', customerPhone: AGENT }, now), { ok: false, rejection: 'target-conflict' })
  })
}
