// The store contract (style 7): what the session runner and the API rely on from sql/, run
// against whichever backend `open` gives (real Postgres with TEST_DATABASE_URL, embedded PGlite
// without), so both backends keep one behaviour.
import type { Test } from 'tap'
import { sql } from 'slonik'
import type { Database } from '../../sql/db.js'
import {
  bulkInsertSessions, createSession, expireSessions, findIdempotent, findLiveByPartyHash, getSession, getSessionRecord,
  listSessions, loadLiveSessions, loadNumbers, loadTenantsRouting, seedNumbers, updateSession, type BulkSessionRow,
} from '../../sql/sessions.js'
import { listBillingEvents, listPeriods, listPricing, recordUsage, usageTotals } from '../../sql/billing.js'
import { purgeOldRecords } from '../../sql/retention.js'
import { CALL_START, createRecordWriter, getCall, getCallRecord, listCalls, listSessionCalls, listSessionSms, type CallInsert, type SmsInsert } from '../../sql/records.js'
import { createHub } from '../../sql/hub.js'
import { uuidv7 } from '../../sql/vocabulary/ids.js'
import { readMigrations } from '../../sql/migrate.js'
import type { SessionRecord } from '../../engine/types.js'
import {
  addNumbers, addTenant, cipher, count, createArgs, envelope, hashParty, MINUTE, party, proxy, record, T0,
} from './fixtures.js'

export function storeContract(t: Test, open: (t: Test) => Promise<Database>): void {
  let db: Database
  t.before(async () => {
    db = await open(t)
    await addNumbers(db.pool, 100)
  })

  t.test('migrations: all applied, one current price per tier and metric', async t => {
    const versions = await db.pool.anyFirst(sql.unsafe`SELECT version FROM schema_migrations ORDER BY version`)
    t.same(versions, readMigrations().map(m => m.version), 'every shipped migration') // listed in test/sql/migrate.test.ts
    // 003: room on every page, so an update of a session row that changes no indexed column is HOT.
    t.same(await db.pool.oneFirst(sql.unsafe`SELECT reloptions FROM pg_class WHERE relname = 'sessions'`), ['fillfactor=85'])
    t.equal(await count(db.pool, 'pricing', sql.fragment`effective_until IS NULL`), 18)
    const pricing = await listPricing(db.pool)
    t.match(pricing.find(p => p.tier === 'STARTER' && p.metric === 'call_minute'), { unitPrice: 0.015, currency: 'USD', effectiveUntil: null })
  })

  t.test('createSession writes session, participants, counters, outbox and usage in one go', async t => {
    const tenant = await addTenant(db.pool)
    const rec = record(tenant, { proxy: proxy(1), agent: party(1), customer: party(2) })
    t.equal(await createSession(db.pool, createArgs(tenant, rec)), 'ok')

    t.equal(await db.pool.oneFirst(sql.unsafe`SELECT live_sessions FROM tenants WHERE id = ${tenant.id}`), 1)
    t.match(await db.pool.one(sql.unsafe`SELECT tenant_id, last_tenant_id, live_sessions, released_at FROM proxy_numbers WHERE number = ${proxy(1)}`),
      { tenant_id: tenant.id, last_tenant_id: tenant.id, live_sessions: 1, released_at: null })
    t.equal(await count(db.pool, 'session_participants', sql.fragment`session_id = ${rec.id}`), 2)
    t.same(await db.pool.anyFirst(sql.unsafe`SELECT type FROM outbox WHERE session_id = ${rec.id} ORDER BY created_at, id`),
      ['session.created', 'session.activated'])

    const events = await listBillingEvents(db.pool, { tenantId: tenant.id, periodStart: T0 - MINUTE, periodEnd: T0 + MINUTE, limit: 10 })
    t.match(events.find(e => e.metric === 'session_created'), { quantity: '1', unit_price: '0.005', session_id: rec.id, recorded_at: new Date(T0).toISOString() })
    t.match(events.find(e => e.metric === 'number_rental'), { quantity: '1', unit_price: '0.05', metadata: { proxyNumber: proxy(1) } })
    const periods = await listPeriods(db.pool, { tenantId: tenant.id, limit: 5 })
    t.match(periods, { data: [{ status: 'ACTIVE', periodStart: '2026-01-01T00:00:00.000Z', periodEnd: '2026-02-01T00:00:00.000Z', closedAt: null }], after: null })

    const view = await getSession(db.pool, tenant.id, rec.id)
    t.same(view, {
      id: rec.id, tenantId: tenant.id, proxyNumber: proxy(1), state: 'ACTIVE', directionMode: 'BIDIRECTIONAL',
      metadata: { orderId: 'o-1' }, gracePeriodMinutes: 15, maxDurationMinutes: 120, recordingEnabled: false,
      consentPrompt: 'DEFAULT', expiresAt: new Date(T0 + 120 * MINUTE).toISOString(), createdAt: new Date(T0).toISOString(),
      activatedAt: new Date(T0).toISOString(), endedAt: null, expiredAt: null, callCount: 0, lastCallAt: null,
      channels: ['voice', 'sms'], inactivityTimeoutMinutes: null, // contract D10: the defaults, shown
    })
    t.notMatch(JSON.stringify(view), /\+1416/, 'no real number in the view')
    t.equal(await getSession(db.pool, (await addTenant(db.pool)).id, rec.id), null, 'another tenant sees nothing')
    t.equal(await getSession(db.pool, tenant.id, 'not-a-uuid'), null)
    t.same(await getSessionRecord(db.pool, rec.id, cipher), rec, 'the record round-trips, numbers decrypted')

    t.match(await findLiveByPartyHash(db.pool, tenant.id, hashParty(tenant.salt, party(1))), { id: rec.id, proxyNumber: proxy(1), metadata: { orderId: 'o-1' } })
    t.match(await findLiveByPartyHash(db.pool, tenant.id, hashParty(tenant.salt, party(2))), { id: rec.id })
    t.equal(await findLiveByPartyHash(db.pool, tenant.id, hashParty(tenant.salt, party(3))), null)
  })

  t.test('quota and proxy refusals leave nothing behind', async t => {
    const tenant = await addTenant(db.pool)
    const first = record(tenant, { proxy: proxy(2), agent: party(10), customer: party(11) })
    t.equal(await createSession(db.pool, createArgs(tenant, first, 1)), 'ok')
    const over = record(tenant, { proxy: proxy(3), agent: party(12), customer: party(13) })
    t.equal(await createSession(db.pool, createArgs(tenant, over, 1)), 'tier-session-limit')

    // contract 3.1: the agent already takes part in a live session on proxy 2.
    const overlap = record(tenant, { proxy: proxy(2), agent: party(10), customer: party(14) })
    t.equal(await createSession(db.pool, createArgs(tenant, overlap, 10)), 'proxy-conflict')
    // contract D4: proxy 2 is held by this tenant, another tenant cannot use it.
    const other = await addTenant(db.pool)
    const foreign = record(other, { proxy: proxy(2), agent: party(15), customer: party(16) })
    t.equal(await createSession(db.pool, createArgs(other, foreign, 10)), 'proxy-conflict')

    t.equal(await db.pool.oneFirst(sql.unsafe`SELECT live_sessions FROM tenants WHERE id = ${tenant.id}`), 1)
    t.equal(await db.pool.oneFirst(sql.unsafe`SELECT live_sessions FROM tenants WHERE id = ${other.id}`), 0)
    t.equal(await db.pool.oneFirst(sql.unsafe`SELECT live_sessions FROM proxy_numbers WHERE number = ${proxy(2)}`), 1)
    t.equal(await db.pool.oneFirst(sql.unsafe`SELECT tenant_id FROM proxy_numbers WHERE number = ${proxy(3)}`), null)
    for (const r of [over, overlap, foreign]) {
      t.equal(await count(db.pool, 'sessions', sql.fragment`id = ${r.id}`), 0)
      t.equal(await count(db.pool, 'outbox', sql.fragment`session_id = ${r.id}`), 0)
      t.equal(await count(db.pool, 'billing_events', sql.fragment`session_id = ${r.id}`), 0)
    }
    // The same customer with another agent on the same proxy is refused too (either party counts).
    const sameCustomer = record(tenant, { proxy: proxy(2), agent: party(17), customer: party(11) })
    t.equal(await createSession(db.pool, createArgs(tenant, sameCustomer, 10)), 'proxy-conflict')

    // Inside a caller's transaction a refusal rolls back to a savepoint; the caller's work goes on.
    const inner = record(tenant, { proxy: proxy(3), agent: party(18), customer: party(19) })
    await db.pool.transaction(async tx => {
      t.equal(await createSession(tx, createArgs(tenant, over, 1)), 'tier-session-limit')
      t.equal(await createSession(tx, createArgs(tenant, inner, 10)), 'ok')
    })
    t.equal(await count(db.pool, 'sessions', sql.fragment`id = ${inner.id}`), 1)
    t.equal(await db.pool.oneFirst(sql.unsafe`SELECT live_sessions FROM tenants WHERE id = ${tenant.id}`), 2)
  })

  t.test('Idempotency-Key: the first answer is replayed, nothing is created twice', async t => {
    const tenant = await addTenant(db.pool)
    const rec = record(tenant, { proxy: proxy(4), agent: party(20), customer: party(21) })
    const idem = { key: 'k-1', requestHash: 'h-1', status: 201, response: { id: rec.id, state: 'ACTIVE' } }
    t.equal(await createSession(db.pool, createArgs(tenant, rec, 10, { idempotency: idem })), 'ok')
    const retry = record(tenant, { proxy: proxy(5), agent: party(20), customer: party(21) })
    t.same(await createSession(db.pool, createArgs(tenant, retry, 10, { idempotency: { ...idem, requestHash: 'h-2', response: {} } })),
      { idempotentReplay: { requestHash: 'h-1', status: 201, response: { id: rec.id, state: 'ACTIVE' } } })
    t.equal(await count(db.pool, 'sessions', sql.fragment`tenant_id = ${tenant.id}`), 1)
    t.equal(await count(db.pool, 'billing_events', sql.fragment`tenant_id = ${tenant.id} AND metric = 'session_created'`), 1, 'billed once')
    t.same(await findIdempotent(db.pool, tenant.id, 'k-1'), { requestHash: 'h-1', status: 201, response: { id: rec.id, state: 'ACTIVE' } })
    t.equal(await findIdempotent(db.pool, tenant.id, 'k-2'), null)
    t.equal(await findIdempotent(db.pool, (await addTenant(db.pool)).id, 'k-1'), null, 'keys are per tenant')
    // A key older than 24 h is free again.
    await db.pool.query(sql.unsafe`UPDATE idempotency_keys SET created_at = now() - interval '25 hours' WHERE tenant_id = ${tenant.id}`)
    t.equal(await findIdempotent(db.pool, tenant.id, 'k-1'), null)
    const later = record(tenant, { proxy: proxy(5), agent: party(22), customer: party(23) })
    t.equal(await createSession(db.pool, createArgs(tenant, later, 10, { idempotency: { ...idem, requestHash: 'h-3' } })), 'ok')
    t.match(await findIdempotent(db.pool, tenant.id, 'k-1'), { requestHash: 'h-3' })
  })

  t.test('updateSession: versions, metadata merge, swap, audit, release on expiry', async t => {
    const tenant = await addTenant(db.pool)
    const rec = record(tenant, { proxy: proxy(6), agent: party(30), customer: party(31) })
    t.equal(await createSession(db.pool, createArgs(tenant, rec)), 'ok')
    const blocker = record(tenant, { proxy: proxy(6), agent: party(32), customer: party(33) })
    t.equal(await createSession(db.pool, createArgs(tenant, blocker)), 'ok')

    const ended: SessionRecord = { ...rec, state: 'GRACE_PERIOD', endedAt: T0 + MINUTE, expiresAt: T0 + 16 * MINUTE, version: 2 }
    t.equal(await updateSession(db.pool, { prev: rec, next: ended, metadataPatch: { note: 'x' }, events: [] }), 'ok')
    t.equal(await updateSession(db.pool, { prev: rec, next: ended, events: [] }), 'stale', 'version 1 is gone')
    t.match(await getSession(db.pool, tenant.id, rec.id), { state: 'GRACE_PERIOD', endedAt: new Date(T0 + MINUTE).toISOString(), metadata: { orderId: 'o-1', note: 'x' } })

    // Swap to a customer who is in another live session on this proxy: refused, nothing changes.
    const taken = { ...ended, customerPhone: party(33), version: 3 }
    const swapTaken = { oldCustomerHash: hashParty(tenant.salt, party(31)), newCustomerHash: hashParty(tenant.salt, party(33)), newCustomerEnc: cipher.encrypt(party(33)) }
    t.equal(await updateSession(db.pool, { prev: ended, next: taken, swap: swapTaken, audit: { action: 'session.target_swapped', data: {} }, events: [envelope(taken, 'session.target_swapped')] }), 'proxy-conflict')
    t.same(await getSessionRecord(db.pool, rec.id, cipher), ended)
    t.equal(await count(db.pool, 'audit_log', sql.fragment`target_id = ${rec.id}`), 0)

    const swapped = { ...ended, customerPhone: party(34), version: 3 }
    const swap = { oldCustomerHash: hashParty(tenant.salt, party(31)), newCustomerHash: hashParty(tenant.salt, party(34)), newCustomerEnc: cipher.encrypt(party(34)) }
    const audit = { action: 'session.target_swapped', data: { previousPartyBHash: swap.oldCustomerHash, newPartyBHash: swap.newCustomerHash } }
    t.equal(await updateSession(db.pool, { prev: ended, next: swapped, swap, audit, events: [envelope(swapped, 'session.target_swapped')] }), 'ok')
    t.same(await getSessionRecord(db.pool, rec.id, cipher), swapped)
    t.same((await db.pool.anyFirst(sql.unsafe`SELECT party_hash FROM session_participants WHERE session_id = ${rec.id} ORDER BY party_hash`)),
      [hashParty(tenant.salt, party(30)), swap.newCustomerHash].sort())
    t.match(await db.pool.one(sql.unsafe`SELECT action, data FROM audit_log WHERE target_id = ${rec.id}`), audit)
    t.equal(await findLiveByPartyHash(db.pool, tenant.id, swap.oldCustomerHash), null, 'the old customer is unwired')
    t.equal(await count(db.pool, 'outbox', sql.fragment`session_id = ${rec.id} AND type = 'session.target_swapped'`), 1)

    const expired = { ...swapped, state: 'EXPIRED' as const, expiredAt: T0 + 16 * MINUTE, version: 4 }
    t.equal(await updateSession(db.pool, { prev: swapped, next: expired, events: [envelope(expired, 'session.expired')] }), 'ok')
    t.equal(await count(db.pool, 'session_participants', sql.fragment`session_id = ${rec.id}`), 0)
    t.equal(await db.pool.oneFirst(sql.unsafe`SELECT live_sessions FROM tenants WHERE id = ${tenant.id}`), 1)
    t.match(await db.pool.one(sql.unsafe`SELECT tenant_id, live_sessions FROM proxy_numbers WHERE number = ${proxy(6)}`), { tenant_id: tenant.id, live_sessions: 1 }, 'still held by the other session')
    t.same(await expireSessions(db.pool, [expired], r => [envelope(r, 'session.expired')]), [], 'already expired: nothing to do')
    t.equal(await count(db.pool, 'outbox', sql.fragment`session_id = ${rec.id} AND type = 'session.expired'`), 1)
  })

  t.test('expireSessions: only live rows, exactly once, proxy released at zero', async t => {
    const tenant = await addTenant(db.pool)
    const a = record(tenant, { proxy: proxy(7), agent: party(40), customer: party(41) })
    const b = record(tenant, { proxy: proxy(7), agent: party(42), customer: party(43) })
    for (const r of [a, b]) t.equal(await createSession(db.pool, createArgs(tenant, r)), 'ok')
    const asked: string[] = []
    const env = (r: SessionRecord) => {
      asked.push(r.id)
      return [envelope({ ...r, state: 'EXPIRED' }, 'session.expired', T0 + 120 * MINUTE)]
    }
    const recs = [a, b].map(r => ({ ...r, state: 'EXPIRED' as const, expiredAt: T0 + 120 * MINUTE, version: 2 }))
    t.same((await expireSessions(db.pool, [recs[0]!], env)), [a.id])
    t.match(await db.pool.one(sql.unsafe`SELECT tenant_id, live_sessions FROM proxy_numbers WHERE number = ${proxy(7)}`), { tenant_id: tenant.id, live_sessions: 1 })
    t.same((await expireSessions(db.pool, recs, env)).sort(), [b.id])
    t.same(asked, [a.id, b.id], 'events are asked for only for rows this call expired')
    const p = await db.pool.one(sql.unsafe`SELECT tenant_id, last_tenant_id, live_sessions, released_at FROM proxy_numbers WHERE number = ${proxy(7)}`)
    t.match(p, { tenant_id: null, last_tenant_id: tenant.id, live_sessions: 0 })
    t.type(p.released_at, 'number', 'cooldown started')
    t.equal(await db.pool.oneFirst(sql.unsafe`SELECT live_sessions FROM tenants WHERE id = ${tenant.id}`), 0)
    t.match(await getSession(db.pool, tenant.id, a.id), { state: 'EXPIRED', expiredAt: new Date(T0 + 120 * MINUTE).toISOString() })
    t.equal(await count(db.pool, 'outbox', sql.fragment`session_id IN (${a.id}, ${b.id}) AND type = 'session.expired'`), 2)
    t.same(await expireSessions(db.pool, recs, env), [])
    t.equal(await count(db.pool, 'outbox', sql.fragment`session_id IN (${a.id}, ${b.id}) AND type = 'session.expired'`), 2)
    // A stale writer of the old version loses against the expiry.
    t.equal(await updateSession(db.pool, { prev: a, next: { ...a, state: 'GRACE_PERIOD', version: 2 }, events: [] }), 'stale')
  })

  // Migration 012 dropped the foreign keys of sessions and billing_events: what they refused is
  // still refused, by the statements that write those rows.
  t.test('no session or usage row without its tenant, proxy number or billing period', async t => {
    const tenant = await addTenant(db.pool)
    const ghost = { id: uuidv7() as SessionRecord['tenantId'], salt: tenant.salt }
    const bulkRow = (tn: typeof tenant, proxyNumber: SessionRecord['proxyNumber'], n: number): BulkSessionRow => {
      const rec = record(tn, { proxy: proxyNumber, agent: party(3000 + n), customer: party(3100 + n) })
      return { rec, agentHash: hashParty(tn.salt, rec.agentPhone), customerHash: hashParty(tn.salt, rec.customerPhone), agentEnc: cipher.encrypt(rec.agentPhone), customerEnc: cipher.encrypt(rec.customerPhone) }
    }
    const before = await count(db.pool, 'sessions')
    await t.rejects(bulkInsertSessions(db.pool, [bulkRow(tenant, proxy(60), 1), bulkRow(ghost, proxy(61), 2)]), { code: '23503' }, 'bulk: an unknown tenant fails the chunk')
    await t.rejects(bulkInsertSessions(db.pool, [bulkRow(tenant, '+19995550000' as SessionRecord['proxyNumber'], 3)]), { code: '23503' }, 'bulk: an unknown proxy number fails the chunk')
    t.equal(await count(db.pool, 'sessions'), before, 'nothing of either chunk was written')
    // A create for a tenant that does not exist writes nothing: its tenant row gates the insert,
    // and its month's billing period, which the create opens first, keeps its key to tenants.
    await t.rejects(createSession(db.pool, createArgs(ghost, record(ghost, { proxy: proxy(62), agent: party(3200), customer: party(3201) }))), { code: '23503' }, 'create: refused without a tenant row')
    // ... nor for a proxy number outside the pool.
    t.equal(await createSession(db.pool, createArgs(tenant, record(tenant, { proxy: '+19995550001' as SessionRecord['proxyNumber'], agent: party(3202), customer: party(3203) }))), 'proxy-conflict', 'create: refused for a number outside the pool')
    t.equal(await count(db.pool, 'sessions'), before, 'no session row')
    t.equal(await count(db.pool, 'billing_events', sql.fragment`tenant_id = ${ghost.id}`), 0, 'no usage row without a billing period')
    // Usage of an unknown tenant: its billing period cannot be opened (billing_periods keeps its key).
    await t.rejects(recordUsage(db.pool, { tenantId: ghost.id, metric: 'session_created', quantity: 1, at: T0 }), /foreign key/, 'usage of an unknown tenant is refused')
    t.equal(await count(db.pool, 'billing_events', sql.fragment`tenant_id = ${ghost.id}`), 0)
  })

  t.test('listSessions walks every row exactly once when timestamps collide', async t => {
    const tenant = await addTenant(db.pool)
    const rows: BulkSessionRow[] = []
    for (let i = 0; i < 53; i++) {
      // Three distinct creation times, 53 sessions: most rows share a timestamp.
      const rec = record(tenant, { proxy: proxy(10 + (i % 40)), agent: party(1000 + i), customer: party(2000 + i), at: T0 + (i % 3) * 1000, state: i % 4 === 0 ? 'EXPIRED' : 'ACTIVE' })
      rows.push({ rec, agentHash: hashParty(tenant.salt, rec.agentPhone), customerHash: hashParty(tenant.salt, rec.customerPhone), agentEnc: cipher.encrypt(rec.agentPhone), customerEnc: cipher.encrypt(rec.customerPhone) })
    }
    t.equal(await bulkInsertSessions(db.pool, rows, { chunkSize: 20 }), 53)
    const seen: string[] = []
    let after: string | undefined
    let pages = 0
    for (;;) {
      const page = await listSessions(db.pool, { tenantId: tenant.id, limit: 7, after })
      if (page === 'bad-cursor') throw new Error('bad cursor')
      seen.push(...page.data.map(s => s.id))
      pages++
      if (!page.after) break
      after = page.after
    }
    t.equal(pages, 8)
    t.equal(seen.length, 53)
    t.equal(new Set(seen).size, 53, 'no row twice')
    const byTime = [...rows].sort((x, y) => y.rec.createdAt - x.rec.createdAt || (y.rec.id < x.rec.id ? -1 : 1)).map(r => r.rec.id)
    t.same(seen, byTime, 'newest first, id breaks ties')

    const active = await listSessions(db.pool, { tenantId: tenant.id, state: 'EXPIRED', limit: 100 })
    t.equal(active !== 'bad-cursor' && active.data.length, 14)
    // The contract's timestamp cursor: a bare ISO time lists sessions created strictly before it.
    const bare = await listSessions(db.pool, { tenantId: tenant.id, limit: 100, after: new Date(T0 + 1000).toISOString() })
    t.equal(bare !== 'bad-cursor' && bare.data.length, 18)
    t.equal(await listSessions(db.pool, { tenantId: tenant.id, limit: 5, after: 'yesterday' }), 'bad-cursor')
    t.equal(await listSessions(db.pool, { tenantId: tenant.id, limit: 5, after: `${new Date(T0).toISOString()}_nope` }), 'bad-cursor')

    // bulkInsertSessions kept the counters and holders of the live ones.
    t.equal(await db.pool.oneFirst(sql.unsafe`SELECT live_sessions FROM tenants WHERE id = ${tenant.id}`), 39)
    t.equal(await count(db.pool, 'session_participants', sql.fragment`session_id IN (SELECT id FROM sessions WHERE tenant_id = ${tenant.id})`), 78)

    // Boot: every live session once, decrypted, whatever the batch size.
    const loaded: SessionRecord[] = []
    const n = await loadLiveSessions(db.pool, cipher, recs => { loaded.push(...recs.filter(r => r.tenantId === tenant.id)) }, 7)
    t.ok(n >= 39)
    t.equal(loaded.length, 39)
    t.same(loaded.find(r => r.id === rows[1]!.rec.id), rows[1]!.rec)
  })

  t.test('boot loaders and the number pool', async t => {
    const tenant = await addTenant(db.pool, 'GROWTH')
    const routing = await loadTenantsRouting(db.pool)
    t.same(routing.find(r => r.id === tenant.id), { id: tenant.id, tier: 'GROWTH', expiredCallBehavior: 'DEAD_LINE', supportPhone: null, recordingConsentAudioUrl: null })
    t.equal(await seedNumbers(db.pool, 'US:+12025550100-+12025550199;GB:+447700900000'), 1, 'existing numbers are kept')
    t.equal(await seedNumbers(db.pool, 'GB:+447700900000'), 0, 'idempotent')
    const numbers = await loadNumbers(db.pool)
    t.match(numbers.find(n => n.number === '+447700900000'), { region: 'GB', provider: 'telnyx', tenantId: null, releasedAt: null })
    t.equal(numbers.filter(n => n.region === 'US').length, 100)
  })

  t.test('billing: periods per calendar month, dedupe, totals, late events', async t => {
    const tenant = await addTenant(db.pool, 'ENTERPRISE')
    const jan = Date.UTC(2026, 0, 31, 23, 59, 59)
    const feb = Date.UTC(2026, 1, 1, 0, 0, 5)
    await db.pool.transaction(async tx => {
      t.equal(await recordUsage(tx, { tenantId: tenant.id, metric: 'call_minute', quantity: 3, at: jan, dedupeKey: 'call_minute:c1' }), 1)
      t.equal(await recordUsage(tx, { tenantId: tenant.id, metric: 'call_minute', quantity: 3, at: jan, dedupeKey: 'call_minute:c1' }), 0, 'a replay bills nothing')
      t.equal(await recordUsage(tx, [
        { tenantId: tenant.id, metric: 'sms_sent', quantity: 1, at: feb },
        { tenantId: tenant.id, metric: 'sms_received', quantity: 1, at: feb, unitPrice: null },
      ]), 2)
    })
    // A late event for January after February opened: January's period exists already here;
    // December's did not, and opens CLOSED, so there is still one ACTIVE period.
    await db.pool.transaction(tx => recordUsage(tx, { tenantId: tenant.id, metric: 'sms_sent', quantity: 1, at: Date.UTC(2025, 11, 31) }))
    const periods = await listPeriods(db.pool, { tenantId: tenant.id, limit: 2 })
    if (periods === 'bad-cursor') throw new Error('bad cursor')
    t.match(periods.data, [{ periodStart: '2026-02-01T00:00:00.000Z', status: 'ACTIVE', closedAt: null }, { periodStart: '2026-01-01T00:00:00.000Z', status: 'CLOSED' }])
    const rest = await listPeriods(db.pool, { tenantId: tenant.id, limit: 2, after: periods.after! })
    t.match(rest, { data: [{ periodStart: '2025-12-01T00:00:00.000Z', status: 'CLOSED' }], after: null })
    t.equal(await listPeriods(db.pool, { tenantId: tenant.id, limit: 2, after: 'x' }), 'bad-cursor')
    t.equal(await count(db.pool, 'billing_periods', sql.fragment`tenant_id = ${tenant.id} AND status = 'ACTIVE'`), 1)

    const events = await listBillingEvents(db.pool, { tenantId: tenant.id, periodStart: '2026-01-01T00:00:00Z', periodEnd: '2026-03-01T00:00:00Z', limit: 10 })
    t.same(events.map(e => [e.metric, e.quantity, e.unit_price]), [['call_minute', '3', '0.01'], ['sms_sent', '1', '0.006'], ['sms_received', '1', null]])
    t.same(await listBillingEvents(db.pool, { tenantId: tenant.id, periodStart: '2026-01-01T00:00:00Z', periodEnd: '2026-03-01T00:00:00Z', metric: 'sms_sent', limit: 10, offset: 0 }).then(e => e.length), 1)
    t.same(await usageTotals(db.pool, tenant.id, '2026-01-01T00:00:00Z', '2026-03-01T00:00:00Z'), {
      metrics: { session_created: 0, call_minute: 3, sms_sent: 1, sms_received: 1, recording_minute: 0, number_rental: 0 }, totalEvents: 3,
    })
  })

  t.test('billing: the first usage of many tenants in one batch opens their periods in two statements', async t => {
    const tenants = await Promise.all(Array.from({ length: 40 }, () => addTenant(db.pool)))
    const mar = Date.UTC(2026, 2, 1, 0, 0, 1)
    let statements = 0
    const inserted = await db.pool.transaction(async tx => {
      const counted = new Proxy(tx, {
        get(target, prop) {
          const v = Reflect.get(target, prop, target) as unknown
          return typeof v === 'function' ? (...args: unknown[]) => { statements++; return (v as (...a: unknown[]) => unknown).apply(target, args) } : v
        },
      })
      return recordUsage(counted, tenants.map((x, i) => ({ tenantId: x.id, metric: 'sms_received' as const, quantity: 1, at: mar + i, dedupeKey: `sms_received:many-${i}` })))
    })
    t.equal(inserted, 40, 'every usage row is billed')
    t.equal(statements, 4, 'usage, close, open, usage again: not a few statements per tenant')
    const ids = sql.array(tenants.map(x => x.id), 'uuid')
    t.equal(await count(db.pool, 'billing_periods', sql.fragment`tenant_id = ANY(${ids}) AND status = 'ACTIVE' AND period_start = '2026-03-01T00:00:00Z'`), 40, 'each tenant has its March period, ACTIVE')

    // One tenant, December ACTIVE, then January and February in one batch: December and January
    // close, February is the one ACTIVE period.
    const one = await addTenant(db.pool)
    await db.pool.transaction(tx => recordUsage(tx, { tenantId: one.id, metric: 'sms_sent', quantity: 1, at: Date.UTC(2025, 11, 15) }))
    t.equal(await db.pool.transaction(tx => recordUsage(tx, [
      { tenantId: one.id, metric: 'sms_sent', quantity: 1, at: Date.UTC(2026, 1, 2) },
      { tenantId: one.id, metric: 'sms_sent', quantity: 1, at: Date.UTC(2026, 0, 31, 23, 59, 59) },
    ])), 2)
    const periods = await listPeriods(db.pool, { tenantId: one.id, limit: 5 })
    if (periods === 'bad-cursor') throw new Error('bad cursor')
    t.match(periods.data.map(p => [p.periodStart, p.status]), [
      ['2026-02-01T00:00:00.000Z', 'ACTIVE'], ['2026-01-01T00:00:00.000Z', 'CLOSED'], ['2025-12-01T00:00:00.000Z', 'CLOSED'],
    ])
    t.ok(periods.data.slice(1).every(p => p.closedAt !== null), 'the closed ones say when')
  })

  t.test('RecordWriter: group commit, idempotent upserts, forward-only updates, list cursors', async t => {
    const tenant = await addTenant(db.pool)
    const rec = record(tenant, { proxy: proxy(61), agent: party(60), customer: party(61) })
    t.equal(await createSession(db.pool, createArgs(tenant, rec)), 'ok')
    const errors: string[] = []
    const w = createRecordWriter(db.pool, { onError: c => errors.push(c) })
    const call = (i: number): CallInsert => ({
      id: uuidv7(T0 + i), sessionId: rec.id, tenantId: tenant.id, providerCallId: `CA-${rec.id}-${i}`, status: 'RINGING',
      direction: i % 2 ? 'A_TO_B' : 'B_TO_A', initiatedAt: T0 + i * 1000, partyBHash: hashParty(tenant.salt, rec.customerPhone),
      recordingConsentPlayed: i === 0,
    })
    const calls = Array.from({ length: 25 }, (_, i) => call(i))
    const ids = await Promise.all(calls.map(c => w.upsertCall(c)))
    t.same(ids, calls.map(c => c.id))
    t.equal(await w.upsertCall({ ...calls[0]!, id: uuidv7() }), calls[0]!.id, 'a replayed CallSid keeps the first record')
    t.equal(await count(db.pool, 'call_records', sql.fragment`session_id = ${rec.id}`), 25)

    // Callbacks are applied against the call's state: forward only, a duplicate changes nothing.
    const first = { callId: calls[0]!.id }
    t.equal(await w.callEvent({ key: { providerCallId: calls[0]!.providerCallId }, source: 'status', value: 'in-progress', at: T0 + 2000 }), true)
    t.equal(await w.callEvent({ key: first, source: 'status', value: 'in-progress', at: T0 + 9000 }), false, 'a duplicate changes nothing')
    t.equal(await w.callEvent({ key: first, source: 'dial-status', value: 'completed', duration: 61, at: T0 + 63_000 }), true)
    t.equal(await w.callEvent({ key: first, source: 'status', value: 'busy', at: T0 + 64_000 }), false, 'never backwards')
    t.equal(await w.callEvent({ key: { callId: 'nope' }, source: 'status', value: 'failed', at: T0 }), false)
    t.equal(await w.callEvent({ key: { callId: uuidv7() }, source: 'status', value: 'failed', at: T0 }), false, 'an unknown call changes nothing')
    t.match(await getCallRecord(db.pool, first), { status: 'COMPLETED', durationSeconds: 61, answeredAt: T0 + 2000, endedAt: T0 + 63_000, recordingConsentPlayed: true })

    // Queued in one batch: the insert lands before the callback that follows it.
    const late = call(30)
    const [lateId, lateUpdated] = await Promise.all([w.upsertCall(late), w.callEvent({ key: { providerCallId: late.providerCallId }, source: 'status', value: 'busy', at: T0 + 31_000 })])
    t.equal(lateId, late.id)
    t.equal(lateUpdated, true)

    // callCount/lastCallAt move in the transaction of each NEW call record (26 here; the replayed
    // CallSid counted nothing), so a crash never separates a call from its count.
    t.match(await getSession(db.pool, tenant.id, rec.id), { callCount: 26, lastCallAt: new Date(T0 + 30_000).toISOString() })
    // A call routed earlier but written later (another node's batch) counts, and moves nothing back.
    const early = { ...call(32), initiatedAt: T0 + 4500 }
    t.equal(await w.upsertCall(early), early.id)
    t.match(await getSession(db.pool, tenant.id, rec.id), { callCount: 27, lastCallAt: new Date(T0 + 30_000).toISOString() }, 'lastCallAt never moves back')

    // A bad row (a status the table's CHECK refuses) fails alone: the retry applies the rest one by one.
    const bogus = { ...call(40), status: 'BOGUS' as CallInsert['status'] }
    const fine = call(41)
    const [good, bad] = await Promise.all([w.upsertCall(fine), w.upsertCall(bogus)])
    t.equal(good, fine.id, 'the good row is stored')
    t.equal(bad, null)
    t.ok(errors.includes('23514'), 'the failure is reported by code')

    const walked: string[] = []
    let after: string | undefined
    for (;;) {
      const page = await listSessionCalls(db.pool, { sessionId: rec.id, limit: 10, after })
      if (page === 'bad-cursor') throw new Error('bad cursor')
      walked.push(...page.data.map(c => c.id))
      if (!page.after) break
      after = page.after
    }
    t.equal(walked.length, 28)
    t.same(walked, [...walked].sort(), 'by id')
    t.equal(await listSessionCalls(db.pool, { sessionId: rec.id, limit: 10, after: 'x' }), 'bad-cursor')
    const one = await listSessionCalls(db.pool, { sessionId: rec.id, limit: 1 })
    t.match(one, { data: [{ id: calls[0]!.id, status: 'COMPLETED', recordingConsentPlayed: true, answeredAt: new Date(T0 + 2000).toISOString() }] })

    const aToB = await listCalls(db.pool, { tenantId: tenant.id, direction: 'A_TO_B', limit: 200 })
    t.equal(aToB !== 'bad-cursor' && aToB.data.length, 13)
    const done = await listCalls(db.pool, { tenantId: tenant.id, status: 'COMPLETED', limit: 200 })
    t.match(done, { data: [{ id: calls[0]!.id, durationSeconds: 61 }], after: null })
    t.notOk(done !== 'bad-cursor' && 'recordingConsentPlayed' in done.data[0]!)
    const window = await listCalls(db.pool, { tenantId: tenant.id, periodStart: new Date(T0 + 5000).toISOString(), periodEnd: T0 + 10_000, limit: 200 })
    t.equal(window !== 'bad-cursor' && window.data.length, 5, 'start inclusive, end exclusive')
    const paged = await listCalls(db.pool, { tenantId: tenant.id, sessionId: rec.id, limit: 20 })
    t.equal(paged !== 'bad-cursor' && paged.after, walked[19])
    t.match(await listCalls(db.pool, { tenantId: tenant.id, sessionId: 'x', limit: 5 }), { data: [], after: null })
    t.equal(await listCalls(db.pool, { tenantId: tenant.id, limit: 5, after: 'x' }), 'bad-cursor')
    t.match(await getCall(db.pool, tenant.id, calls[1]!.id), { id: calls[1]!.id, sessionId: rec.id, status: 'RINGING', direction: 'A_TO_B' })
    t.equal(await getCall(db.pool, (await addTenant(db.pool)).id, calls[1]!.id), null, 'another tenant sees nothing')

    // SMS: twelve at the same sentAt, walked newest first exactly once.
    const sms = Array.from({ length: 12 }, (_, i) => ({
      id: uuidv7(), sessionId: rec.id, tenantId: tenant.id, providerMessageId: `SM-${rec.id}-${i}`, forwardMessageId: `FW-${rec.id}-${i}`,
      direction: 'A_TO_B' as const, status: 'SENT' as const, sentAt: T0 + (i < 2 ? 0 : 60_000),
    }))
    t.same((await Promise.all(sms.map(m => w.upsertSms(m)))).map(r => r?.id), sms.map(m => m.id))
    t.same(await w.upsertSms({ ...sms[0]!, id: uuidv7() }), { id: sms[0]!.id, status: 'SENT' }, 'a replayed message id keeps the first record')
    t.equal(await w.updateSmsStatusByForwardId(sms[0]!.forwardMessageId, 'DELIVERED', T0 + 1000), true)
    t.equal(await w.updateSmsStatusByForwardId(sms[0]!.forwardMessageId, 'SENT'), false, 'never backwards')
    t.equal(await w.updateSmsStatusByForwardId(sms[0]!.forwardMessageId, 'FAILED'), false, 'DELIVERED is final')
    const seen: string[] = []
    let cursor: string | undefined
    for (;;) {
      const page = await listSessionSms(db.pool, { sessionId: rec.id, limit: 5, after: cursor })
      if (page === 'bad-cursor') throw new Error('bad cursor')
      seen.push(...page.data.map(m => m.id))
      if (!page.after) break
      cursor = page.after
    }
    t.equal(new Set(seen).size, 12)
    t.equal(seen.length, 12)
    t.same(seen.slice(-2).sort(), [sms[0]!.id, sms[1]!.id].sort(), 'oldest last')
    const bare = await listSessionSms(db.pool, { sessionId: rec.id, limit: 50, after: new Date(T0 + 60_000).toISOString() })
    t.same(bare !== 'bad-cursor' && bare.data.map(m => m.id).sort(), [sms[0]!.id, sms[1]!.id].sort(), 'a bare sentAt: strictly older rows')
    t.match(bare, { data: [{}, { status: 'DELIVERED', deliveredAt: new Date(T0 + 1000).toISOString() }] })
    t.match(await listSessionSms(db.pool, { sessionId: rec.id, limit: 50 }), { data: [{ sessionId: rec.id, direction: 'A_TO_B' }] })
    t.equal(await listSessionSms(db.pool, { sessionId: rec.id, limit: 5, after: 'soon' }), 'bad-cursor')

    // close() flushes what is queued, then refuses.
    const queued = call(50)
    const pending = w.upsertCall(queued)
    await w.close()
    t.equal(await pending, queued.id)
    t.equal(await w.upsertCall(call(51)), null)
    t.ok(errors.includes('writer-closed'))
  })

  t.test('RecordWriter: events and usage commit with the record change that causes them, or not at all', async t => {
    const tenant = await addTenant(db.pool)
    const rec = record(tenant, { proxy: proxy(62), agent: party(62), customer: party(63) })
    t.equal(await createSession(db.pool, createArgs(tenant, rec)), 'ok')
    const announced: string[] = []
    const hub = createHub()
    hub.on('records', envs => { announced.push(...envs.map(e => e.id)) })
    const w = createRecordWriter(db.pool, { hub })
    t.teardown(() => w.close())
    const outbox = (id: string) => count(db.pool, 'outbox', sql.fragment`id = ${id}`)
    const usage = (key: string) => count(db.pool, 'billing_events', sql.fragment`dedupe_key = ${key}`)
    const callRow = (i: number): CallInsert => ({
      id: uuidv7(T0 + i), sessionId: rec.id, tenantId: tenant.id, providerCallId: `CA-fx-${rec.id}-${i}`, status: 'RINGING',
      direction: 'A_TO_B', initiatedAt: T0 + i, partyBHash: 'h',
    })

    // A new call: its event rides in the insert. The replay of its CallSid writes no second event.
    const first = callRow(1)
    const incoming = envelope(rec, 'call.incoming', T0 + 1)
    t.equal(await w.upsertCall(first, [incoming]), first.id)
    const replayEvent = envelope(rec, 'call.incoming', T0 + 2)
    t.equal(await w.upsertCall({ ...first, id: uuidv7() }, [replayEvent]), first.id)
    t.equal(await outbox(incoming.id), 1)
    t.equal(await outbox(replayEvent.id), 0, 'a replayed CallSid emits nothing')

    // A callback that changes the call: its event and usage commit with it, once.
    t.equal(await w.callEvent({ key: { callId: first.id }, source: 'dial-status', value: 'completed', duration: 42, at: T0 + 60_000 }), true)
    t.equal(await w.callEvent({ key: { callId: first.id }, source: 'dial-status', value: 'completed', duration: 42, at: T0 + 61_000 }), false)
    const ended = await db.pool.anyFirst(sql.unsafe`SELECT id FROM outbox WHERE type = 'call.ended' AND envelope->'data'->>'callId' = ${first.id}`) as readonly string[]
    t.equal(ended.length, 1, 'one call.ended')
    t.equal(await usage(`call_minute:${first.id}`), 1, 'billed once')

    // A refused change (a status the table's CHECK refuses) takes its event and its usage down with it.
    const refused = { ...callRow(3), status: 'BOGUS' as CallInsert['status'] }
    const lost = envelope(rec, 'call.incoming', T0 + 3)
    t.equal(await w.upsertCall(refused, [lost]), null)
    const sms = { id: uuidv7(), sessionId: rec.id, tenantId: tenant.id, providerMessageId: `SM-fx-${rec.id}`, direction: 'A_TO_B' as const, status: 'BOGUS' as SmsInsert['status'], sentAt: T0 }
    const received = envelope(rec, 'sms.received', T0 + 4)
    t.equal(await w.upsertSms(sms, { events: [received], usage: [{ tenantId: tenant.id, metric: 'sms_received', quantity: 1, at: T0, dedupeKey: `sms_received:${sms.id}` }] }), null)
    t.equal(await outbox(lost.id) + await outbox(received.id), 0, 'no event without its record')
    t.equal(await usage(`sms_received:${sms.id}`), 0, 'no usage without its record')

    // The forward's outcome: sms.sent only while the message was still QUEUED.
    const queued = { ...sms, status: 'QUEUED' as const, providerMessageId: `SM-fx2-${rec.id}` }
    t.same(await w.upsertSms(queued), { id: queued.id, status: 'QUEUED' })
    const sent = envelope(rec, 'sms.sent', T0 + 5)
    t.equal(await w.markSmsForwarded(queued.id, 'FW-fx', 'SENT', T0 + 5, { events: [sent] }), true)
    const twice = envelope(rec, 'sms.sent', T0 + 6)
    t.equal(await w.markSmsForwarded(queued.id, 'FW-fx', 'SENT', T0 + 6, { events: [twice] }), false)
    t.equal(await outbox(sent.id), 1)
    t.equal(await outbox(twice.id), 0)

    t.same(announced, [incoming.id, ended[0], sent.id], 'announced after commit: exactly the events written, in order')
  })

  t.test('RecordWriter: a voice fetch\'s events are made from its record when it commits (CALL_START)', async t => {
    const tenant = await addTenant(db.pool)
    const rec = record(tenant, { proxy: proxy(64), agent: party(64), customer: party(65) })
    t.equal(await createSession(db.pool, createArgs(tenant, rec)), 'ok')
    const announced: Array<{ type: string; createdAt: string; data: unknown }> = []
    const hub = createHub()
    hub.on('records', envs => { announced.push(...envs) })
    const w = createRecordWriter(db.pool, { hub })
    t.teardown(() => w.close())
    const row = (i: number, direction: CallInsert['direction'] = 'A_TO_B'): CallInsert => ({
      id: uuidv7(T0 + i), sessionId: rec.id, tenantId: tenant.id, providerCallId: `CA-start-${rec.id}-${i}`, status: 'RINGING',
      direction, initiatedAt: T0 + i, partyBHash: 'h', proxy: rec.proxyNumber,
    })
    const stored = async (callId: string) => (await db.pool.any(sql.unsafe`
      SELECT type, envelope FROM outbox WHERE envelope->'data'->>'callId' = ${callId} ORDER BY id`) as readonly { type: string; envelope: { createdAt: string; data: unknown } }[])
      .map(r => ({ type: r.type, createdAt: r.envelope.createdAt, data: r.envelope.data }))
    const data = (c: CallInsert, status: string) => ({
      sessionId: rec.id, tenantId: tenant.id, proxyNumber: rec.proxyNumber, callId: c.id, direction: c.direction, status, durationSeconds: 0,
    })

    const routed = row(1)
    t.equal(await w.upsertCall(routed, CALL_START), routed.id)
    const incoming = { type: 'call.incoming', createdAt: new Date(routed.initiatedAt).toISOString(), data: data(routed, 'RINGING') }
    t.same(await stored(routed.id), [incoming], 'a routed call: its call.incoming, as the fetch saw it')

    const refused = { ...row(2, 'B_TO_A'), status: 'FAILED' as const, endedAt: T0 + 2 }
    t.equal(await w.upsertCall(refused, CALL_START), refused.id)
    const at = new Date(refused.initiatedAt).toISOString()
    t.same(await stored(refused.id), [
      { type: 'call.incoming', createdAt: at, data: data(refused, 'RINGING') },
      { type: 'call.failed', createdAt: at, data: data(refused, 'FAILED') },
    ], 'a refused call: call.incoming and call.failed')

    t.equal(await w.upsertCall({ ...routed, id: uuidv7() }, CALL_START), routed.id, 'a replayed CallSid keeps the first record')
    t.same(await stored(routed.id), [incoming], 'and makes no second event')
    t.same(announced.map(e => e.type), ['call.incoming', 'call.incoming', 'call.failed'], 'announced after commit: what was written')
  })

  t.test('retention keeps at least 30 days of call and SMS records', async t => {
    const tenant = await addTenant(db.pool)
    const rec = record(tenant, { proxy: proxy(60), agent: party(50), customer: party(51) })
    t.equal(await createSession(db.pool, createArgs(tenant, rec)), 'ok')
    for (const [i, age] of [[1, 10], [2, 31], [3, 100]] as const) {
      await db.pool.query(sql.unsafe`
        INSERT INTO call_records (id, session_id, tenant_id, provider_call_id, status, direction, initiated_at, party_b_hash)
        VALUES (gen_random_uuid(), ${rec.id}, ${tenant.id}, ${`ret-${rec.id}-${i}`}, 'COMPLETED', 'A_TO_B', now() - make_interval(days => ${age}), 'h')`)
      await db.pool.query(sql.unsafe`
        INSERT INTO sms_records (id, session_id, tenant_id, provider_message_id, direction, status, sent_at)
        VALUES (gen_random_uuid(), ${rec.id}, ${tenant.id}, ${`ret-${rec.id}-${i}`}, 'A_TO_B', 'DELIVERED', now() - make_interval(days => ${age}))`)
    }
    const before = await getSession(db.pool, tenant.id, rec.id)
    t.equal(before?.callCount, 3, 'callCount: the session\'s call records')
    const purged = await purgeOldRecords(db.pool, 1)
    t.ok(purged.calls >= 2 && purged.sms >= 2, 'days below 30 are raised to 30')
    t.equal(await count(db.pool, 'call_records', sql.fragment`session_id = ${rec.id}`), 1)
    t.equal(await count(db.pool, 'sms_records', sql.fragment`session_id = ${rec.id}`), 1)
    // Migration 011: purged calls stay counted, in the same statement that deleted them.
    const after = await getSession(db.pool, tenant.id, rec.id)
    t.same([after?.callCount, after?.lastCallAt], [3, before?.lastCallAt], 'callCount and lastCallAt survive the purge')
    t.match(await db.pool.one(sql.unsafe`SELECT purged_calls, purged_last_call_at FROM sessions WHERE id = ${rec.id}`), { purged_calls: 2 })
    t.equal(await purgeOldRecords(db.pool, 1).then(p => p.calls), 0, 'nothing left to purge')
    t.equal((await getSession(db.pool, tenant.id, rec.id))?.callCount, 3, 'a second purge counts nothing twice')
  })
}
