// Creates that arrive together are written by one batch (sql/sessions.ts CREATE_BATCH).
// A batch writes exactly what its creates written one by one would, or nothing at all.
import t from 'tap'
import { sql, type CommonQueryMethods, type DatabasePool } from 'slonik'
import type { E164 } from '../../engine/types.js'
import { directPool } from '../../sql/direct.js'
import { createSession, createSessionsBatch, type CreateSessionArgs } from '../../sql/sessions.js'
import { testDatabase } from '../support/db.js'
import { addNumbers, addTenant, count, createArgs, MINUTE, party, proxy, record, T0, type TenantFixture } from './fixtures.js'

async function insertTenant(db: CommonQueryMethods, tenant: TenantFixture, tier: string): Promise<void> {
  await db.query(sql.unsafe`
    INSERT INTO tenants (id, name, tier, salt) VALUES (${tenant.id}, ${`tenant ${tenant.id}`}, ${tier}, ${sql.binary(tenant.salt)})`)
}

/** Everything a create writes, without what each database mints on its own (period ids, usage ids). */
async function written(db: CommonQueryMethods): Promise<unknown> {
  return {
    sessions: await db.any(sql.unsafe`
      SELECT id, tenant_id, proxy_number, state, direction_mode, metadata, grace_period_minutes, max_duration_minutes,
             recording_enabled, consent_prompt, encode(agent_phone_enc, 'hex') AS a, encode(customer_phone_enc, 'hex') AS c,
             agent_hash, customer_hash, expires_at, created_at, activated_at, ended_at, expired_at, call_count, version,
             channels, inactivity_timeout_minutes
      FROM sessions ORDER BY id`),
    participants: await db.any(sql.unsafe`SELECT proxy_number, party_hash, session_id FROM session_participants ORDER BY 1, 2`),
    outbox: await db.any(sql.unsafe`
      SELECT id, tenant_id, session_id, type, envelope, created_at, attempts, done_at IS NULL AS due, outcome FROM outbox ORDER BY id`),
    usage: await db.any(sql.unsafe`
      SELECT tenant_id, metric, quantity, unit_price, recorded_at, session_id, call_record_id, metadata, dedupe_key
      FROM billing_events ORDER BY metric, session_id, dedupe_key`),
    tenants: await db.any(sql.unsafe`SELECT id, live_sessions FROM tenants ORDER BY id`),
    proxies: await db.any(sql.unsafe`
      SELECT number, tenant_id, last_tenant_id, live_sessions, released_at FROM proxy_numbers ORDER BY number`),
    keys: await db.any(sql.unsafe`SELECT tenant_id, key, request_hash, status_code, response FROM idempotency_keys ORDER BY 1, 2`),
  }
}

t.test('a batch writes what its creates one by one would', async t => {
  const one = await testDatabase(t)
  const batched = await testDatabase(t)
  const a = await addTenant(one.pool, 'STARTER')
  const b = await addTenant(one.pool, 'ENTERPRISE')
  await insertTenant(batched.pool, a, 'STARTER')
  await insertTenant(batched.pool, b, 'ENTERPRISE')
  for (const db of [one, batched]) {
    await addNumbers(db.pool, 10)
    // b's webhook wants session.created only: its session.activated rows are written done (skipped).
    await db.pool.query(sql.unsafe`
      INSERT INTO webhook_configs (tenant_id, url, events, secret_enc)
      VALUES (${b.id}, 'https://hooks.example.com/in', ${sql.array(['session.created'], 'text')}, '\\x00'::bytea)`)
  }
  // The month's periods are opened by a first create of each tenant, the same in both databases.
  const first = [
    createArgs(a, record(a, { proxy: proxy(0), agent: party(1), customer: party(2) })),
    createArgs(b, record(b, { proxy: proxy(5), agent: party(1), customer: party(2) })),
  ]
  for (const db of [one, batched]) for (const x of first) t.equal(await createSession(db.pool, x), 'ok')

  const at = T0 + MINUTE
  const args: CreateSessionArgs[] = [
    // Another session on a proxy the tenant holds, one on a free proxy, two on the same free proxy.
    createArgs(a, record(a, { proxy: proxy(0), agent: party(3), customer: party(4), at })),
    createArgs(a, record(a, { proxy: proxy(1), agent: party(1), customer: party(2), at }), 100, { metadata: { k: ['v', 1] } }),
    createArgs(b, record(b, { proxy: proxy(6), agent: party(3), customer: party(4), at }), 100, { billing: { unitPrice: '0.125' } }),
    createArgs(b, record(b, { proxy: proxy(6), agent: party(5), customer: party(6), at }), 100,
      { idempotency: { key: 'booking-1', requestHash: 'h1', status: 201, response: { id: 'view' } } }),
  ]
  args[1]!.rec = { ...args[1]!.rec, channels: 1, inactivityTimeoutMinutes: 30, recordingEnabled: true }
  args[3]!.rec = { ...args[3]!.rec, state: 'PENDING', directionMode: 'A_TO_B_ONLY', gracePeriodMinutes: 5 }

  for (const x of args) t.equal(await createSession(one.pool, x), 'ok', 'one by one')
  t.equal(await createSessionsBatch(directPool(batched.pool)!, args), true, 'the batch wrote them all')
  t.same(await written(batched.pool), await written(one.pool), 'the same rows, the same counters')
  t.equal(await count(batched.pool, 'billing_events', sql.fragment`metric = 'number_rental'`), 4, "each proxy's rental of the day, once")
  t.equal(await count(batched.pool, 'idempotency_keys'), 1, 'the Idempotency-Key claimed')
  t.equal(await count(batched.pool, 'outbox', sql.fragment`done_at IS NULL`), 3, "due: the session.created events of b's three sessions")
})

t.test('a batch that cannot be written whole writes nothing', async t => {
  const db = await testDatabase(t)
  await addNumbers(db.pool, 10)
  const a = await addTenant(db.pool)
  const b = await addTenant(db.pool)
  t.equal(await createSession(db.pool, createArgs(a, record(a, { proxy: proxy(0), agent: party(1), customer: party(2) }))), 'ok')
  t.equal(await createSession(db.pool, createArgs(b, record(b, { proxy: proxy(5), agent: party(1), customer: party(2) }))), 'ok')
  const direct = directPool(db.pool)!
  const fine = (n: number, quota = 100) => createArgs(a, record(a, { proxy: proxy(1), agent: party(100 + n), customer: party(200 + n) }), quota)
  const keyed = (n: number, key: string) => createArgs(a, record(a, { proxy: proxy(2), agent: party(300 + n), customer: party(400 + n) }), 100,
    { idempotency: { key, requestHash: `h${n}`, status: 201, response: { n } } })
  t.equal(await createSession(db.pool, keyed(0, 'used')), 'ok')
  // docs/dual-proxy.md: a bound number is for its tenant's pinned creates only, never a native create's.
  await db.pool.query(sql.unsafe`UPDATE proxy_numbers SET bound_tenant_id = ${a.id} WHERE number = ${proxy(7)}`)
  const onBound = createArgs(a, record(a, { proxy: proxy(7), agent: party(7), customer: party(8) }))
  t.equal(await createSession(db.pool, onBound), 'proxy-conflict', 'a create alone on a bound number')

  const cases: Record<string, CreateSessionArgs[]> = {
    'a participant already on its proxy': [fine(1), createArgs(a, record(a, { proxy: proxy(0), agent: party(1), customer: party(9) }))],
    'two creates of one party on one proxy': [fine(1), createArgs(a, record(a, { proxy: proxy(1), agent: party(101), customer: party(9) }))],
    'a proxy another tenant holds': [fine(1), createArgs(a, record(a, { proxy: proxy(5), agent: party(7), customer: party(8) }))],
    'a bound proxy': [fine(1), onBound],
    "the tenant's quota": [fine(1, 2), fine(2, 2)],
    'an Idempotency-Key used in the last 24 h': [fine(1), keyed(1, 'used')],
    'one Idempotency-Key twice': [keyed(2, 'twice'), keyed(3, 'twice')],
    'a month without a period yet': [fine(1), createArgs(a, record(a, { proxy: proxy(2), agent: party(7), customer: party(8), at: T0 + 40 * 24 * 60 * MINUTE }))],
  }
  const before = await written(db.pool)
  for (const [name, batch] of Object.entries(cases)) {
    t.equal(await createSessionsBatch(direct, batch), false, name)
    t.same(await written(db.pool), before, `${name}: nothing written`)
  }
})

t.test('creates that arrive together go in batches, each with its own answer', async t => {
  const db = await testDatabase(t)
  await addNumbers(db.pool, 40)
  const a = await addTenant(db.pool)
  const b = await addTenant(db.pool)
  const pool: DatabasePool = db.pool
  t.equal(await createSession(pool, createArgs(a, record(a, { proxy: proxy(0), agent: party(1), customer: party(2) }), 12)), 'ok')
  t.equal(await createSession(pool, createArgs(b, record(b, { proxy: proxy(20), agent: party(1), customer: party(2) }))), 'ok')
  // 30 at once: tenant a's quota leaves room for 11 of its 15, and party 1 is on proxy 0 already.
  const args = Array.from({ length: 30 }, (_, i) => {
    const tenant = i % 2 ? b : a
    const p = proxy((i % 2 ? 20 : 0) + (i % 7)) as E164
    return createArgs(tenant, record(tenant, { proxy: p, agent: party(i === 14 ? 1 : 1000 + i), customer: party(2000 + i) }), i % 2 ? 100 : 12)
  })
  // b's creates carry Idempotency-Keys; one of them was used by an earlier request.
  const replayed = { key: 'k1', requestHash: 'h', status: 201, response: { earlier: true } }
  t.equal(await createSession(pool, createArgs(b, record(b, { proxy: proxy(39), agent: party(7), customer: party(8) }), 100, { idempotency: replayed })), 'ok')
  args.forEach((x, i) => {
    if (i % 2) x.idempotency = { key: `k${i}`, requestHash: 'h', status: 201, response: { i } }
  })
  const out = await Promise.all(args.map(x => createSession(pool, x)))
  const ofA = out.filter((_, i) => i % 2 === 0)
  t.same(out[1], { idempotentReplay: { requestHash: 'h', status: 201, response: { earlier: true } } }, 'a used key: the earlier answer')
  t.same(out.filter((_, i) => i % 2 === 1 && i !== 1), Array(14).fill('ok'), 'every other create of b')
  t.equal(ofA.filter(r => r === 'ok').length, 11, "a: as many as its quota leaves")
  t.equal(ofA.filter(r => r === 'tier-session-limit').length + ofA.filter(r => r === 'proxy-conflict').length, 4)
  t.equal(await count(pool, 'sessions'), 3 + 14 + 11, 'exactly the answered ones written')
  t.equal(await pool.oneFirst(sql.unsafe`SELECT live_sessions FROM tenants WHERE id = ${a.id}`), 12)
  t.equal(await count(pool, 'outbox'), 2 * 28)
  t.equal(await count(pool, 'billing_events', sql.fragment`metric = 'session_created'`), 28)
  t.equal(await count(pool, 'idempotency_keys'), 15, "every key of b's creates, the replayed one once")
})
