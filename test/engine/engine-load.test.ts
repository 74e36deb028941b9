// load(): boot and cross-node sync. Upsert by version (older or equal ignored), drop what is no
// longer live, emit nothing; the store is the truth, so clashing live sessions give way.
import t from 'tap'
import { UnknownTenantError, type E164, type TenantId } from '../../engine/index.js'
import { AGENT, CUSTOMER, MINUTE, T0, TENANT_A, TENANT_B, harness, record, us } from './helpers.js'

t.test('a live record is loaded, routes and counts, and nothing is emitted', async t => {
  const h = harness()
  const rec = record({ version: 7 })
  h.engine.load(rec)
  t.same(h.engine.get(rec.id), rec)
  t.equal(h.engine.liveCount(TENANT_A.id), 1)
  t.match(h.engine.route(rec.proxyNumber, AGENT, h.clock.now), { kind: 'connect', sessionId: rec.id })
  t.same(h.events, [])
})

t.test('older and equal versions are ignored; a newer one replaces', async t => {
  const h = harness()
  const rec = record({ version: 3 })
  h.engine.load(rec)
  h.engine.load({ ...rec, customerPhone: us(70), version: 3 })
  h.engine.load({ ...rec, customerPhone: us(71), version: 2 })
  t.equal(h.engine.get(rec.id)?.customerPhone, CUSTOMER)
  h.engine.load({ ...rec, customerPhone: us(72), version: 4 })
  t.equal(h.engine.get(rec.id)?.customerPhone, us(72))
  t.match(h.engine.route(rec.proxyNumber, CUSTOMER, h.clock.now), { kind: 'no-session' }, 'the old customer is unwired')
  t.same(h.events, [])
})

t.test('a newer version that is no longer live drops the session and releases the number', async t => {
  const h = harness()
  const rec = record({ version: 2 })
  h.engine.load(rec)
  const endedAt = T0 + MINUTE
  h.engine.load({ ...rec, state: 'EXPIRED', endedAt, expiresAt: endedAt, expiredAt: endedAt, version: 3 })
  t.equal(h.engine.get(rec.id), undefined)
  t.equal(h.engine.liveCount(TENANT_A.id), 0)
  t.same(h.engine.poolCounts(endedAt).find(c => c.region === 'US'), { region: 'US', provider: 'telnyx', total: 3, available: 2, inUse: 0, cooldown: 1 })
  h.engine.load({ ...rec, version: 2 })
  t.equal(h.engine.get(rec.id), undefined, 'a late live version of it stays out')
  t.same(h.events, [])
})

t.test('a record that is not live and not held changes nothing', async t => {
  const h = harness()
  h.engine.load(record({ state: 'FAILED' }))
  t.equal(h.engine.size(), 0)
  t.same(h.engine.poolCounts(h.clock.now).find(c => c.region === 'US')?.available, 3)
})

t.test('the store wins: a loaded session evicts live sessions it clashes with', async t => {
  const h = harness()
  const mine = h.create({ agentPhone: AGENT, customerPhone: us(60) })
  const other = record({ proxyNumber: mine.proxyNumber, agentPhone: AGENT, customerPhone: us(61) })
  h.engine.load(other)
  t.equal(h.engine.get(mine.id), undefined, 'the clashing session left memory')
  t.match(h.engine.route(mine.proxyNumber, AGENT, h.clock.now), { kind: 'connect', sessionId: other.id })
  t.equal(h.engine.liveCount(TENANT_A.id), 1)
})

t.test('a loaded session of another tenant takes the number over', async t => {
  const h = harness()
  const mine = h.create()
  const theirs = record({ tenantId: TENANT_B.id, proxyNumber: mine.proxyNumber, agentPhone: us(80), customerPhone: us(81) })
  h.engine.load(theirs)
  t.equal(h.engine.get(mine.id), undefined)
  t.match(h.engine.route(mine.proxyNumber, AGENT, h.clock.now), { kind: 'no-session', tenant: { id: TENANT_B.id } })
  t.equal(h.engine.liveCount(TENANT_A.id), 0)
  t.equal(h.engine.liveCount(TENANT_B.id), 1)
})

t.test('a live session on a number outside the pool still routes', async t => {
  const h = harness()
  const rec = record({ proxyNumber: '+12025550199' as E164 })
  h.engine.load(rec)
  t.match(h.engine.route(rec.proxyNumber, AGENT, h.clock.now), { kind: 'connect' })
  t.match(h.engine.poolCounts(h.clock.now), [{ region: 'US', provider: 'telnyx' }, { region: 'GB' }, { region: 'US', provider: 'unknown', total: 1, inUse: 1 }])
})

t.test('a record moved to another proxy starts over there', async t => {
  const h = harness()
  const rec = record({ proxyNumber: us(0) })
  h.engine.load(rec)
  h.engine.load({ ...rec, proxyNumber: us(1), version: 2 })
  t.match(h.engine.route(us(0), AGENT, h.clock.now), { kind: 'no-session' })
  t.match(h.engine.route(us(1), AGENT, h.clock.now), { kind: 'connect', sessionId: rec.id })
  t.equal(h.engine.liveCount(TENANT_A.id), 1)
})

t.test('loaded timestamps survive the compact form', async t => {
  const h = harness()
  const rec = record({ state: 'GRACE_PERIOD', createdAt: T0, activatedAt: T0 + 5, endedAt: T0 + MINUTE, expiresAt: T0 + 16 * MINUTE, version: 5, directionMode: 'B_TO_A_ONLY', recordingEnabled: true, consentPrompt: 'CUSTOM', gracePeriodMinutes: 15, maxDurationMinutes: 45 })
  h.engine.load(rec)
  t.same(h.engine.get(rec.id), rec)
})

t.test('records with an unknown tenant or a malformed number are refused', async t => {
  const h = harness()
  t.throws(() => h.engine.load(record({ tenantId: 'x' as TenantId })), UnknownTenantError)
  t.throws(() => h.engine.load(record({ customerPhone: '555-0100' as E164 })), /not E\.164/)
  t.equal(h.engine.size(), 0)
})

t.test('the extras go to the session the record leaves in memory, on every path of load()', async t => {
  const h = harness()
  const snap = (id: string) => h.engine.live(id as never)?.snapshot()
  const rec = record({ proxyNumber: us(0), version: 2 })
  h.engine.load(rec, { metadataJson: '{"a": 1}', callCount: 3, lastCallAt: T0 + MINUTE })
  t.match(snap(rec.id), { metadataJson: '{"a": 1}', callCount: 3, lastCallAt: T0 + MINUTE }, 'a new session')

  h.engine.load(rec, { metadataJson: '{"a": 1}', callCount: 5, lastCallAt: T0 + 2 * MINUTE })
  t.match(snap(rec.id), { callCount: 5, lastCallAt: T0 + 2 * MINUTE }, 'the same version again: the counters still move on')

  h.engine.load({ ...rec, customerPhone: us(70), version: 3 }, { metadataJson: '{"b": 2}', callCount: 6, lastCallAt: T0 + 3 * MINUTE })
  t.match(snap(rec.id), { metadataJson: '{"b": 2}', callCount: 6, record: { customerPhone: us(70) } }, 'a newer version')

  h.engine.load({ ...rec, proxyNumber: us(1), version: 4 }, { metadataJson: '{"c": 3}', callCount: 7, lastCallAt: T0 + 3 * MINUTE })
  t.match(snap(rec.id), { metadataJson: '{"c": 3}', callCount: 7, record: { proxyNumber: us(1) } }, 'a session that moved starts over with them')
})
