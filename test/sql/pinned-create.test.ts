// The pinned create in the store (sql/pinned-create.ts, docs/dual-proxy.md), below the engine that
// refuses most of these first: what the database itself refuses (a number neither bound to the
// tenant nor held by it, one bound to another tenant, a party already live on its number, the
// quota) writes nothing; a create writes the session, its participants, its events and the
// caller's own writes (`within`) together.
import t from 'tap'
import { sql, type CommonQueryMethods } from 'slonik'
import { createPinnedSession } from '../../sql/pinned-create.js'
import { testDatabase } from '../support/db.js'
import { addNumbers, addTenant, createArgs, party, proxy, record } from './fixtures.js'

async function written(db: CommonQueryMethods): Promise<unknown> {
  return {
    sessions: await db.any(sql.unsafe`SELECT id, tenant_id, proxy_number, customer_proxy_number FROM sessions ORDER BY id`),
    participants: await db.any(sql.unsafe`SELECT proxy_number, party_hash, session_id FROM session_participants ORDER BY 1, 2`),
    outbox: await db.anyFirst(sql.unsafe`SELECT id FROM outbox ORDER BY id`),
    tenants: await db.any(sql.unsafe`SELECT id, live_sessions FROM tenants ORDER BY id`),
    proxies: await db.any(sql.unsafe`SELECT number, tenant_id, live_sessions FROM proxy_numbers WHERE live_sessions > 0 OR tenant_id IS NOT NULL ORDER BY number`),
    marks: await db.anyFirst(sql.unsafe`SELECT n FROM pinned_marks ORDER BY n`),
    usage: await db.any(sql.unsafe`SELECT metric, quantity::int, session_id, dedupe_key FROM billing_events ORDER BY metric, dedupe_key`),
  }
}

t.test('the store refuses what the engine did not see, and writes nothing then', async t => {
  const db = await testDatabase(t)
  await addNumbers(db.pool, 10)
  await db.pool.query(sql.unsafe`CREATE TABLE pinned_marks (n int)`)
  const a = await addTenant(db.pool, 'ENTERPRISE')
  const b = await addTenant(db.pool, 'ENTERPRISE')
  const bind = (n: number, tenant: { id: string }) => db.pool.query(sql.unsafe`UPDATE proxy_numbers SET bound_tenant_id = ${tenant.id} WHERE number = ${proxy(n)}`)
  await bind(1, a)
  await bind(2, a)
  await bind(3, b)
  const pinned = (agent: number, customer: number, agentProxy: number, customerProxy: number, quota = 100) => {
    const rec = { ...record(a, { proxy: proxy(agentProxy), agent: party(agent), customer: party(customer) }), customerProxyNumber: proxy(customerProxy) }
    const mark = (tx: CommonQueryMethods) => tx.query(sql.unsafe`INSERT INTO pinned_marks (n) VALUES (${agent})`).then(() => undefined)
    return createPinnedSession(db.pool, { ...createArgs(a, rec, quota), within: mark })
  }

  const empty = await written(db.pool)
  t.equal(await pinned(10, 11, 1, 4), 'proxy-unavailable', 'a number bound to nobody and not held')
  t.equal(await pinned(10, 11, 1, 3), 'proxy-unavailable', "a number bound to another tenant")
  t.equal(await pinned(10, 11, 1, 2, 0), 'tier-session-limit')
  t.same(await written(db.pool), empty, 'the refusals wrote nothing')

  t.equal(await pinned(10, 11, 1, 2), 'ok')
  const one = await written(db.pool) as { sessions: { id: string }[]; participants: unknown[]; outbox: unknown[]; proxies: unknown[]; marks: number[]; usage: unknown[] }
  t.equal(one.sessions.length, 1)
  t.equal(one.participants.length, 2, 'each party on its own number')
  t.ok(one.outbox.length > 0, 'its events')
  t.same(one.proxies, [{ number: proxy(1), tenant_id: a.id, live_sessions: 1 }, { number: proxy(2), tenant_id: a.id, live_sessions: 1 }], 'both numbers held')
  t.same(one.marks, [10], "the caller's own writes, with it")
  t.match(one.usage, [
    { metric: 'number_rental', quantity: 1, dedupe_key: new RegExp(`${proxy(1).replace('+', '\\+')}`) },
    { metric: 'number_rental', quantity: 1, dedupe_key: new RegExp(`${proxy(2).replace('+', '\\+')}`) },
    { metric: 'session_created', quantity: 1, session_id: one.sessions[0]!.id },
  ], "its usage, as a native create's (the month's period opened by it)")

  t.equal(await pinned(10, 12, 1, 2), 'proxy-in-use', 'the agent is already live on its number')
  t.same(await written(db.pool), one, 'nothing written, the caller\'s writes neither')
  t.equal(await pinned(13, 12, 1, 2), 'ok', 'other parties on the same numbers')
  t.equal((await written(db.pool) as { usage: unknown[] }).usage.length, 4, 'the day\'s rentals once, a session_created more')
})
