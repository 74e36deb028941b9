// A create without an Idempotency-Key is one statement and one round trip (no BEGIN,
// no COMMIT, nothing about idempotency), refusals included; with a key, the claim and the create
// share a transaction. Counted at the driver: every query any pg client sends in this process.
import t from 'tap'
import pg from 'pg'
import { sql } from 'slonik'
import { createSession } from '../../sql/sessions.js'
import { testDatabase } from '../support/db.js'
import { addNumbers, addTenant, count, createArgs, party, proxy, record } from './fixtures.js'

const sent: string[] = []
const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown }
const query = proto.query
proto.query = function (this: unknown, ...args: unknown[]) {
  const q = args[0]
  sent.push(typeof q === 'string' ? q : String((q as { text?: string }).text))
  return query.apply(this, args)
}
t.teardown(() => { proto.query = query })

async function counted<T>(fn: () => Promise<T>): Promise<{ out: T; statements: string[] }> {
  sent.length = 0
  const out = await fn()
  return { out, statements: sent.splice(0).map(s => s.trim().slice(0, 40)) }
}

t.test('statements per create', async t => {
  const db = await testDatabase(t)
  await addNumbers(db.pool, 10)
  const tenant = await addTenant(db.pool)
  // The first create of the month opens the billing period (its own transaction), once.
  t.equal(await createSession(db.pool, createArgs(tenant, record(tenant, { proxy: proxy(0), agent: party(1), customer: party(2) }))), 'ok')

  const ok = await counted(() => createSession(db.pool, createArgs(tenant, record(tenant, { proxy: proxy(1), agent: party(3), customer: party(4) }))))
  t.equal(ok.out, 'ok')
  t.equal(ok.statements.length, 1, `one statement: ${JSON.stringify(ok.statements)}`)
  t.notMatch(ok.statements.join(' '), /BEGIN|START TRANSACTION|COMMIT|idempotency/i)

  const full = createArgs(tenant, record(tenant, { proxy: proxy(2), agent: party(5), customer: party(6) }), 2)
  const refused = await counted(() => createSession(db.pool, full))
  t.equal(refused.out, 'tier-session-limit')
  t.equal(refused.statements.length, 1, 'a refusal is one statement too')
  t.equal(await count(db.pool, 'sessions', sql.fragment`id = ${full.rec.id}`), 0, 'and it wrote nothing')

  const clash = await counted(() => createSession(db.pool, createArgs(tenant, record(tenant, { proxy: proxy(1), agent: party(3), customer: party(7) }))))
  t.equal(clash.out, 'proxy-conflict')
  t.equal(clash.statements.length, 1)

  const keyed = await counted(() => createSession(db.pool, createArgs(tenant, record(tenant, { proxy: proxy(3), agent: party(8), customer: party(9) }), 100,
    { idempotency: { key: 'k', requestHash: 'h', status: 201, response: {} } })))
  t.equal(keyed.out, 'ok')
  t.equal(keyed.statements.length, 4, `with a key: BEGIN, claim, create, COMMIT: ${JSON.stringify(keyed.statements)}`)
})

t.test('creates that arrive while others are at the database share a statement', async t => {
  const db = await testDatabase(t)
  await addNumbers(db.pool, 20)
  const tenant = await addTenant(db.pool)
  t.equal(await createSession(db.pool, createArgs(tenant, record(tenant, { proxy: proxy(0), agent: party(1), customer: party(2) }))), 'ok')
  const many = await counted(() => Promise.all(Array.from({ length: 16 }, (_, i) =>
    createSession(db.pool, createArgs(tenant, record(tenant, { proxy: proxy(i), agent: party(100 + i), customer: party(200 + i) }))))))
  t.same(many.out, Array(16).fill('ok'))
  const batches = many.statements.filter(s => s.includes('SELECT create_sessions_'))
  t.ok(batches.length >= 1, `at least one batch: ${JSON.stringify(many.statements)}`)
  t.ok(many.statements.length < 16, `fewer statements than creates: ${many.statements.length}`)
  t.equal(await count(db.pool, 'sessions'), 17)
})
