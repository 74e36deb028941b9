// The database, not memory, arbitrates between nodes: parallel writers (two pools stand for two
// nodes) never break the participant-overlap rule (contract 3.1), the quota (contract 8.2) or the
// exactly-once session.expired, and the counters stay equal to what they count.
import t from 'tap'
import { sql } from 'slonik'
import { createSession, expireSessions, updateSession } from '../../sql/sessions.js'
import type { SessionRecord } from '../../engine/types.js'
import { testDatabase } from '../support/db.js'
import { addNumbers, addTenant, count, createArgs, envelope, hashParty, cipher, MINUTE, party, proxy, record, T0 } from './fixtures.js'

t.test('50 parallel creates sharing an agent on 5 proxies: one per proxy wins', async t => {
  const db = await testDatabase(t)
  await addNumbers(db.pool, 5)
  const other = await db.createPool({ maximumPoolSize: 5 })
  const tenant = await addTenant(db.pool)
  const results = await Promise.all(Array.from({ length: 50 }, (_, i) => {
    const rec = record(tenant, { proxy: proxy(i % 5), agent: party(1), customer: party(100 + i) })
    return createSession(i % 2 ? db.pool : other, createArgs(tenant, rec))
  }))
  t.equal(results.filter(r => r === 'ok').length, 5)
  t.equal(results.filter(r => r === 'proxy-conflict').length, 45)
  const agentHash = hashParty(tenant.salt, party(1))
  const rows = await db.pool.anyFirst(sql.unsafe`SELECT proxy_number FROM session_participants WHERE party_hash = ${agentHash} ORDER BY 1`)
  t.same(rows, [0, 1, 2, 3, 4].map(proxy), 'the agent is on each proxy exactly once')
  t.equal(await count(db.pool, 'sessions', sql.fragment`tenant_id = ${tenant.id}`), 5, 'losers left no session row')
  t.equal(await db.pool.oneFirst(sql.unsafe`SELECT live_sessions FROM tenants WHERE id = ${tenant.id}`), 5)
  t.same(await db.pool.anyFirst(sql.unsafe`SELECT live_sessions FROM proxy_numbers ORDER BY number`), [1, 1, 1, 1, 1])
})

t.test('quota below the attempts: exactly the quota succeeds', async t => {
  const db = await testDatabase(t)
  await addNumbers(db.pool, 50)
  const other = await db.createPool({ maximumPoolSize: 5 })
  const tenant = await addTenant(db.pool)
  const results = await Promise.all(Array.from({ length: 50 }, (_, i) => {
    const rec = record(tenant, { proxy: proxy(i), agent: party(200 + i), customer: party(300 + i) })
    return createSession(i % 2 ? db.pool : other, createArgs(tenant, rec, 7))
  }))
  t.equal(results.filter(r => r === 'ok').length, 7)
  t.equal(results.filter(r => r === 'tier-session-limit').length, 43)
  t.equal(await db.pool.oneFirst(sql.unsafe`SELECT live_sessions FROM tenants WHERE id = ${tenant.id}`), 7)
  t.equal(await count(db.pool, 'proxy_numbers', sql.fragment`tenant_id IS NOT NULL`), 7, 'refused sessions hold no proxy')
  t.equal(await count(db.pool, 'billing_events', sql.fragment`metric = 'session_created'`), 7)
})

t.test('expireSessions from two nodes at once: each session.expired written once', async t => {
  const db = await testDatabase(t)
  await addNumbers(db.pool, 10)
  const other = await db.createPool({ maximumPoolSize: 3 })
  const tenant = await addTenant(db.pool)
  const recs: SessionRecord[] = []
  for (let i = 0; i < 30; i++) {
    const rec = record(tenant, { proxy: proxy(i % 10), agent: party(400 + i), customer: party(500 + i) })
    t.equal(await createSession(db.pool, createArgs(tenant, rec)), 'ok')
    recs.push({ ...rec, state: 'EXPIRED', expiredAt: T0 + 120 * MINUTE, version: 2 })
  }
  const env = (r: SessionRecord) => [envelope(r, 'session.expired', T0 + 120 * MINUTE)]
  // Two nodes, overlapping batches in different orders, twice each.
  const [a, b, c, d] = await Promise.all([
    expireSessions(db.pool, recs, env),
    expireSessions(other, [...recs].reverse(), env),
    expireSessions(other, recs.slice(10), env),
    expireSessions(db.pool, recs.slice(0, 20).reverse(), env),
  ])
  const all = [...a, ...b, ...c, ...d]
  t.equal(all.length, 30, 'every session expired by exactly one call')
  t.equal(new Set(all).size, 30)
  t.equal(await count(db.pool, 'outbox', sql.fragment`type = 'session.expired'`), 30)
  t.equal(await db.pool.oneFirst(sql.unsafe`SELECT live_sessions FROM tenants WHERE id = ${tenant.id}`), 0)
  t.equal(await count(db.pool, 'proxy_numbers', sql.fragment`tenant_id IS NOT NULL OR live_sessions <> 0`), 0, 'every proxy released')
  t.equal(await count(db.pool, 'session_participants'), 0)
  t.same(await expireSessions(db.pool, recs, env), [], 'a reboot that tries again changes nothing')
})

t.test('random interleavings of create, end, swap and expire keep every counter exact', async t => {
  const db = await testDatabase(t)
  await addNumbers(db.pool, 6)
  const nodes = [db.pool, await db.createPool({ maximumPoolSize: 4 })]
  const tenant = await addTenant(db.pool)
  const live = new Map<string, SessionRecord>()
  let seed = 42
  const rand = (n: number) => {
    seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31
    return seed % n
  }
  const outcomes = new Map<string, number>()
  for (let round = 0; round < 12; round++) {
    const ops = Array.from({ length: 16 }, async (_, k) => {
      const node = nodes[k % 2]!
      const choice = rand(4)
      const current = [...live.values()]
      if (choice === 0 || current.length === 0) {
        const rec = record(tenant, { proxy: proxy(rand(6)), agent: party(rand(8)), customer: party(10 + rand(8)), at: T0 + round * 1000 })
        const r = await createSession(node, createArgs(tenant, rec, 20))
        if (r === 'ok') live.set(rec.id, rec)
        return typeof r === 'string' ? `create:${r}` : 'create:replay'
      }
      const prev = current[rand(current.length)]!
      if (choice === 1) {
        const next = { ...prev, state: 'GRACE_PERIOD' as const, endedAt: T0, version: prev.version + 1 }
        const r = await updateSession(node, { prev, next, events: [] })
        if (r === 'ok') live.set(prev.id, next)
        return `end:${r}`
      }
      if (choice === 2) {
        const customer = party(10 + rand(8))
        const next = { ...prev, customerPhone: customer, version: prev.version + 1 }
        const swap = { oldCustomerHash: hashParty(tenant.salt, prev.customerPhone), newCustomerHash: hashParty(tenant.salt, customer), newCustomerEnc: cipher.encrypt(customer) }
        const r = customer === prev.agentPhone || customer === prev.customerPhone ? 'skip' : await updateSession(node, { prev, next, swap, events: [] })
        if (r === 'ok') live.set(prev.id, next)
        return `swap:${r}`
      }
      const done = await expireSessions(node, [{ ...prev, state: 'EXPIRED', expiredAt: T0 }], r => [envelope(r, 'session.expired')])
      for (const id of done) live.delete(id)
      return `expire:${done.length}`
    })
    for (const o of await Promise.all(ops)) outcomes.set(o, (outcomes.get(o) ?? 0) + 1)
  }
  t.ok(outcomes.get('create:ok'), 'some creates won')
  t.ok(outcomes.get('create:proxy-conflict'), 'some collided')
  const liveCount = await count(db.pool, 'sessions', sql.fragment`state IN ('PENDING','ACTIVE','GRACE_PERIOD')`)
  t.equal(await db.pool.oneFirst(sql.unsafe`SELECT live_sessions FROM tenants WHERE id = ${tenant.id}`), liveCount, 'tenant counter')
  const drift = await db.pool.any(sql.unsafe`
    SELECT p.number FROM proxy_numbers p
    LEFT JOIN (SELECT proxy_number, count(*) AS n FROM sessions WHERE state IN ('PENDING','ACTIVE','GRACE_PERIOD') GROUP BY 1) s ON s.proxy_number = p.number
    WHERE p.live_sessions <> COALESCE(s.n, 0) OR (p.live_sessions = 0) <> (p.tenant_id IS NULL)`)
  t.same(drift, [], 'proxy counters and holders')
  t.equal(await count(db.pool, 'session_participants'), liveCount * 2, 'two participants per live session')
  const dupes = await db.pool.any(sql.unsafe`
    SELECT s.proxy_number, h FROM sessions s, LATERAL (VALUES (s.agent_hash), (s.customer_hash)) v(h)
    WHERE s.state IN ('PENDING','ACTIVE','GRACE_PERIOD') GROUP BY 1, 2 HAVING count(*) > 1`)
  t.same(dupes, [], 'no party twice on a proxy among live sessions')
  t.equal(await count(db.pool, 'outbox', sql.fragment`type = 'session.expired'`), await count(db.pool, 'sessions', sql.fragment`state = 'EXPIRED'`))
})
