// sql/webhooks.ts on a real database (both backends): config upsert, secret encryption, the
// delivery log cursor, and the outbox lease.
import t from 'tap'
import { randomBytes } from 'node:crypto'
import { sql, type CommonQueryMethods } from 'slonik'
import { testDatabase } from '../support/db.js'
import { uuidv7 } from '../../sql/vocabulary/ids.js'
import { buildEnvelope, type EventType } from '../../sql/vocabulary/event-envelope.js'
import { insertOutbox } from '../../sql/outbox.js'
import {
  claimDue, createSecretCipher, getWebhookConfig, insertDelivery, listDeliveries, markDone, markRetry,
  putWebhookConfig, recentDeliveries,
} from '../../sql/webhooks.js'

// One database for the file (opening one costs seconds on PGlite); tests use their own tenants,
// and only the last one touches the outbox.
let shared: ReturnType<typeof testDatabase> | null = null
const root = t
const database = () => (shared ??= testDatabase(root))

async function seedTenant(db: CommonQueryMethods): Promise<string> {
  const id = uuidv7()
  await db.query(sql.unsafe`INSERT INTO tenants (id, name, salt) VALUES (${id}, ${`t-${id}`}, ${sql.binary(randomBytes(32))})`)
  return id
}

function envelope(tenantId: string, sessionId: string, type: EventType = 'session.created') {
  return buildEnvelope(uuidv7(), type, Date.now(), { sessionId, tenantId, proxyNumber: '+12025550100', state: 'ACTIVE' })
}

t.test('config: one per tenant, registering again overwrites url, events and secret', async t => {
  const { pool } = await database()
  const tenantId = await seedTenant(pool)
  const cipher = createSecretCipher(randomBytes(32))
  t.equal(await getWebhookConfig(pool, tenantId), null)
  await putWebhookConfig(pool, { tenantId, url: 'https://a.example/hook', events: ['session.created'], secretEnc: cipher.encrypt('whsec_one'), now: Date.parse('2026-01-01T00:00:00Z') })
  await putWebhookConfig(pool, { tenantId, url: 'https://b.example/hook', events: ['call.ended', 'sms.sent'], secretEnc: cipher.encrypt('whsec_two'), now: Date.parse('2026-01-02T00:00:00Z') })
  const c = await getWebhookConfig(pool, tenantId)
  t.match(c, { tenantId, url: 'https://b.example/hook', events: ['call.ended', 'sms.sent'], updatedAt: '2026-01-02T00:00:00.000Z' })
  t.equal(cipher.decrypt(c!.secretEnc), 'whsec_two')
  t.notOk(c!.secretEnc.includes(Buffer.from('whsec_two')), 'the secret is not stored in the clear')
  t.equal(Number(await pool.oneFirst(sql.unsafe`SELECT count(*) FROM webhook_configs WHERE tenant_id = ${tenantId}`)), 1)
})

t.test('secret cipher: its own key, authenticated', async t => {
  const key = randomBytes(32)
  const a = createSecretCipher(key)
  const enc = a.encrypt('whsec_abc')
  t.equal(createSecretCipher(key).decrypt(enc), 'whsec_abc')
  t.throws(() => createSecretCipher(randomBytes(32)).decrypt(enc), 'another key cannot decrypt')
  const tampered = Buffer.from(enc)
  tampered[14]! ^= 1
  t.throws(() => a.decrypt(tampered), 'tampering is detected')
})

t.test('delivery log: newest first; the cursor walks every row once even with equal timestamps', async t => {
  const { pool } = await database()
  const tenantId = await seedTenant(pool)
  const other = await seedTenant(pool)
  const at = Date.parse('2026-03-01T12:00:00.000Z')
  const ids: string[] = []
  // 23 rows: 15 share one millisecond, the rest are spread around it
  for (let i = 0; i < 23; i++) {
    const id = uuidv7()
    ids.push(id)
    const requestedAt = i < 15 ? at : at + (i - 14) * 1000 * (i % 2 ? 1 : -1)
    await insertDelivery(pool, {
      id, tenantId, eventId: uuidv7(), event: 'session.created', url: 'https://a.example/hook',
      statusCode: i % 3 ? 200 : 500, success: i % 3 !== 0, attemptCount: 1 + (i % 3), error: i % 3 ? null : 'http-500',
      requestedAt, completedAt: requestedAt + 20,
    })
  }
  await insertDelivery(pool, { id: uuidv7(), tenantId: other, eventId: uuidv7(), event: 'call.ended', url: 'https://x', statusCode: 200, success: true, attemptCount: 1, error: null, requestedAt: at, completedAt: at })

  const seen: string[] = []
  let after: string | undefined
  let pages = 0
  do {
    const page = await listDeliveries(pool, { tenantId, limit: 4, after })
    if (page === 'bad-cursor') throw new Error('bad cursor')
    t.ok(page.data.length <= 4)
    seen.push(...page.data.map(d => d.id))
    after = page.after ?? undefined
    if (after) t.match(after, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z_[0-9a-f-]{36}$/, 'cursor starts with the ISO delivery time')
    pages++
  } while (after && pages < 50)
  t.equal(seen.length, 23)
  t.equal(new Set(seen).size, 23, 'no row twice')
  t.same([...seen].sort(), [...ids].sort(), 'every row once, none of another tenant')

  const all = await listDeliveries(pool, { tenantId, limit: 200 })
  if (all === 'bad-cursor') throw new Error('bad cursor')
  t.same(all.data.map(d => d.id), seen, 'pages concatenate to the full list')
  t.equal(all.after, null)
  for (let i = 1; i < all.data.length; i++) {
    const [p, c] = [all.data[i - 1]!, all.data[i]!]
    t.ok(p.requestedAt > c.requestedAt || (p.requestedAt === c.requestedAt && p.id > c.id), 'newest first, id breaks ties')
  }
  t.match(all.data.find(d => d.error), { statusCode: 500, success: false, error: 'http-500' })
  t.match(all.data[0], { event: 'session.created', url: 'https://a.example/hook', requestedAt: /Z$/, completedAt: /Z$/ })

  // a bare ISO timestamp (the contract's description of `after`): strictly older rows
  const older = await listDeliveries(pool, { tenantId, limit: 200, after: '2026-03-01T12:00:00.000Z' })
  if (older === 'bad-cursor') throw new Error('bad cursor')
  t.equal(older.data.length, 4)
  t.ok(older.data.every(d => d.requestedAt < '2026-03-01T12:00:00.000Z'))
  t.equal(await listDeliveries(pool, { tenantId, limit: 10, after: 'yesterday' }), 'bad-cursor')
  t.equal(await listDeliveries(pool, { tenantId, limit: 10, after: '2026-03-01T12:00:00.000Z_nope' }), 'bad-cursor')
})

t.test('recent deliveries: the latest 50', async t => {
  const { pool } = await database()
  const tenantId = await seedTenant(pool)
  const at = Date.parse('2026-03-01T00:00:00Z')
  for (let i = 0; i < 60; i++) {
    await insertDelivery(pool, { id: uuidv7(), tenantId, eventId: uuidv7(), event: 'sms.sent', url: 'https://a', statusCode: 200, success: true, attemptCount: 1, error: null, requestedAt: at + i * 1000, completedAt: at + i * 1000 })
  }
  const recent = await recentDeliveries(pool, tenantId)
  t.equal(recent.length, 50)
  t.equal(recent[0]!.requestedAt, new Date(at + 59_000).toISOString())
  t.equal(recent[49]!.requestedAt, new Date(at + 10_000).toISOString())
})

/** A tenant whose webhook wants session.created and session.activated: its events are due. */
async function seedSubscribedTenant(db: CommonQueryMethods): Promise<string> {
  const tenantId = await seedTenant(db)
  await putWebhookConfig(db, { tenantId, url: 'https://a.example/hook', events: ['session.created', 'session.activated'], secretEnc: Buffer.alloc(16), now: Date.now() })
  return tenantId
}

t.test('outbox insert: an event no webhook of the tenant wants is stored done (skipped), the others are due', async t => {
  const { pool } = await database()
  const bare = await seedTenant(pool)
  const hooked = await seedSubscribedTenant(pool)
  // One session each: the claim holds a session's later events back behind its first.
  const none = envelope(bare, uuidv7()), notWanted = envelope(hooked, uuidv7(), 'call.ended'), wanted = envelope(hooked, uuidv7())
  const swap = envelope(hooked, uuidv7(), 'session.target_swapped'), swapNone = envelope(bare, uuidv7(), 'session.target_swapped')
  const probe = buildEnvelope(uuidv7(), 'session.created', Date.now(), { sessionId: uuidv7(), tenantId: hooked, proxyNumber: '+12025550100', test: true })
  await insertOutbox(pool, [none, notWanted, wanted, swap, swapNone, probe])
  const rows = new Map((await pool.any(sql.unsafe`SELECT id, outcome, done_at IS NOT NULL AS done FROM outbox`)).map(r => [r.id as string, r]))
  for (const [e, what] of [[none, 'no webhook'], [notWanted, 'not subscribed'], [swapNone, 'target_swapped without a webhook']] as const) {
    t.match(rows.get(e.id), { outcome: 'skipped', done: true }, what)
  }
  for (const [e, what] of [[wanted, 'subscribed'], [swap, 'target_swapped with a webhook'], [probe, 'the test event']] as const) {
    t.match(rows.get(e.id), { outcome: null, done: false }, what)
  }
  const due = await claimDue(pool, { limit: 10, leaseMs: 30_000, now: Date.now() + 1_000 })
  t.same(due.map(e => e.id).sort(), [wanted.id, swap.id, probe.id].sort(), 'only the wanted events are claimed')
  for (const ev of due) await markDone(pool, ev, 'delivered', Date.now() + 1_000) // the next test claims from the same outbox
})

t.test('outbox claim: a lease, disjoint between claimers, per-session order kept', async t => {
  const { pool, createPool } = await database()
  const tenantId = await seedSubscribedTenant(pool)
  const s1 = uuidv7(), s2 = uuidv7()
  const e1 = envelope(tenantId, s1), e2 = envelope(tenantId, s1, 'session.activated'), e3 = envelope(tenantId, s2)
  await insertOutbox(pool, [e1, e2, e3])
  const now = Date.now() + 1_000

  const first = await claimDue(pool, { limit: 10, leaseMs: 30_000, now })
  t.same(first.map(e => e.id), [e1.id, e3.id], 'the second event of session 1 waits for the first')
  t.same(first[0]!.envelope, e1)
  t.equal(first[0]!.attempts, 1, 'the claim counts the attempt')
  t.equal(first[0]!.sessionId, s1)
  t.same(await claimDue(pool, { limit: 10, leaseMs: 30_000, now }), [], 'leased rows are not claimed again')

  // a retry scheduled: still blocks its session; the lease is released
  t.ok(await markRetry(pool, first[0]!, now + 5_000))
  t.same(await claimDue(pool, { limit: 10, leaseMs: 30_000, now: now + 4_999 }), [])
  const again = await claimDue(pool, { limit: 10, leaseMs: 30_000, now: now + 5_000 })
  t.same(again.map(e => e.id), [e1.id])
  t.equal(again[0]!.attempts, 2)
  t.ok(await markDone(pool, again[0]!, 'delivered', now + 5_000))
  t.notOk(await markDone(pool, again[0]!, 'delivered', now + 5_000), 'done once')
  const next = await claimDue(pool, { limit: 10, leaseMs: 30_000, now: now + 5_000 })
  t.same(next.map(e => e.id), [e2.id], 'now the second event of session 1')

  // a lease that lapsed and was taken over cannot be finished by its first holder
  const lapsed = await claimDue(pool, { limit: 10, leaseMs: 30_000, now: now + 36_000 })
  t.same(lapsed.map(e => e.id).sort(), [e2.id, e3.id].sort(), 'expired leases are claimed again')
  t.notOk(await markDone(pool, first[1]!, 'delivered', now + 36_000), 'the old holder of e3 lost its lease')
  t.notOk(await markRetry(pool, next[0]!, now + 40_000), 'the old holder of e2 lost its lease')
  for (const ev of lapsed) t.ok(await markDone(pool, ev, 'skipped', now + 36_000))
  const rows = await pool.any(sql.unsafe`SELECT id, outcome, attempts FROM outbox WHERE id = ANY(${sql.array([e1.id, e2.id, e3.id], 'uuid')}) ORDER BY id`)
  t.same(rows.map(r => r.outcome), ['delivered', 'skipped', 'skipped'])

  // concurrent claimers on separate pools get disjoint rows
  const events = Array.from({ length: 60 }, () => envelope(tenantId, uuidv7()))
  await insertOutbox(pool, events)
  const pools = [pool, await createPool({ maximumPoolSize: 2 }), await createPool({ maximumPoolSize: 2 })]
  const claimed = (await Promise.all(pools.flatMap(p => [1, 2].map(() => claimDue(p, { limit: 12, leaseMs: 30_000, now: now + 37_000 }))))).flat()
  const ids = claimed.map(e => e.id)
  t.equal(new Set(ids).size, ids.length, 'no event claimed twice')
  t.ok(ids.length <= 60)
  const rest = await claimDue(pool, { limit: 100, leaseMs: 30_000, now: now + 37_000 })
  t.equal(ids.length + rest.length, 60, 'every event claimed once in all')
})
