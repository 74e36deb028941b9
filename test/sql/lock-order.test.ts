// Every statement that moves the live counters locks the tenant row before the proxy
// rows (tenants by id, then proxies by number), and both before the participant rows it deletes.
// Two nodes (two pools) run creates, single-session ends straight to EXPIRED (gracePeriodMinutes
// 0), expiry sweeps over shuffled batches, and bulk inserts, all on the same tenants and proxies,
// and Postgres must report no deadlock: neither in pg_stat_database nor as a 40P01 error seen by
// the pools (the store retries deadlocks silently, so only these two places show them). It also
// checks that an expiry racing a swap leaves no participant row behind (it once did: the expiry
// statement that waited for the swap's session row still read participants as of its start).
import t from 'tap'
import { sql, type DatabasePool } from 'slonik'
import { bulkInsertSessions, createSession, expireSessions, updateSession } from '../../sql/sessions.js'
import { errorCode } from '../../sql/errors.js'
import type { SessionRecord } from '../../engine/types.js'
import { testDatabase, testDatabaseUrl } from '../support/db.js'
import { addNumbers, addTenant, cipher, count, createArgs, envelope, hashParty, party, proxy, record, type TenantFixture } from './fixtures.js'

const postgres = testDatabaseUrl() !== null

t.test('creates, ends, expiry sweeps and bulk inserts from two nodes never deadlock', async t => {
  const db = await testDatabase(t)
  const seen: string[] = []
  const watch = (p: DatabasePool) => {
    p.on('error', err => seen.push(errorCode(err)))
    return p
  }
  // Postgres: 2 nodes × 5 connections, all busy at once. Embedded: one backend, so no deadlock
  // can happen; the same workload still checks the statements and the counters there.
  const nodes = [watch(await db.createPool({ maximumPoolSize: 5 })), watch(await db.createPool({ maximumPoolSize: 5 }))]
  const PROXIES_PER_TENANT = 4
  const tenants = [await addTenant(db.pool), await addTenant(db.pool)]
  await addNumbers(db.pool, PROXIES_PER_TENANT * tenants.length)
  const proxyOf = (k: number, i: number) => proxy(k * PROXIES_PER_TENANT + (i % PROXIES_PER_TENANT))

  const deadlocks = async () => {
    await db.pool.query(sql.unsafe`SELECT pg_stat_clear_snapshot()`)
    return Number(await db.pool.oneFirst(sql.unsafe`SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`))
  }
  const before = postgres ? await deadlocks() : 0
  // The backends of db.pool (setup and checks only): the workload's are the others.
  const ownBackends = postgres ? await db.pool.anyFirst(sql.unsafe`SELECT pid FROM pg_stat_activity WHERE datname = current_database()`) : []

  const live = new Map<string, { rec: SessionRecord; tenant: TenantFixture }>()
  const failures: string[] = []
  let nextParty = 1_000
  const CREATES = postgres ? 600 : 120
  let created = 0
  // Bounded in time too: with the old lock order every deadlock stalls the tenant's creates ~1 s.
  const deadline = Date.now() + 8_000
  let done = false
  const outcomes = new Map<string, number>()
  const note = (o: string) => outcomes.set(o, (outcomes.get(o) ?? 0) + 1)
  const guarded = async (what: string, fn: () => Promise<void>) => {
    try {
      await fn()
    } catch (err) {
      failures.push(`${what}: ${errorCode(err)}`)
    }
  }
  const takeLive = (n: number) => [...live.values()].sort(() => Math.random() - 0.5).slice(0, n)
  const newest = () => {
    let last: { rec: SessionRecord; tenant: TenantFixture } | undefined
    for (const v of live.values()) last = v
    return last
  }
  const yieldNow = () => new Promise<void>(r => setImmediate(r))

  // Creators: 8 at once, each on a random proxy of its tenant; agents are reused among 6 per tenant
  // so some creates meet a live participant on their proxy (proxy-conflict) and wait on its row.
  const creator = async (c: number) => {
    const node = nodes[c % 2]!
    while (created < CREATES && Date.now() < deadline) {
      created++
      const k = Math.floor(Math.random() * tenants.length)
      const tenant = tenants[k]!
      const rec = { ...record(tenant, { proxy: proxyOf(k, Math.floor(Math.random() * 97)), agent: party(k * 10 + Math.floor(Math.random() * 6)), customer: party(nextParty++) }), gracePeriodMinutes: 0 }
      await guarded('create', async () => {
        const r = await createSession(node, createArgs(tenant, rec, 10_000))
        note(`create:${typeof r === 'string' ? r : 'replay'}`)
        if (r === 'ok') live.set(rec.id, { rec, tenant })
      })
    }
  }
  // Expiry sweeps: both nodes sweep overlapping, shuffled batches (as two runners' expireDue do).
  const sweeper = async (c: number) => {
    const node = nodes[c % 2]!
    while (!done) {
      const batch = takeLive(40)
      if (batch.length > 0) {
        await guarded('expire', async () => {
          const ids = await expireSessions(node, batch.map(b => ({ ...b.rec, state: 'EXPIRED' as const, expiredAt: Date.now(), version: b.rec.version + 1 })),
            r => [envelope(r, 'session.expired')])
          for (const id of ids) live.delete(id)
          note('expire:batch')
        })
      }
      await yieldNow()
    }
  }
  // Ends with gracePeriodMinutes 0: one session straight to EXPIRED through updateSession (the
  // newest, which the sweeps are least likely to have taken first).
  const ender = async (c: number) => {
    const node = nodes[c % 2]!
    while (!done) {
      const s = newest()
      if (s) {
        const next = { ...s.rec, state: 'EXPIRED' as const, endedAt: Date.now(), expiredAt: Date.now(), version: s.rec.version + 1 }
        await guarded('end', async () => {
          const r = await updateSession(node, { prev: s.rec, next, events: [envelope(next, 'session.expired')] })
          note(`end:${r}`)
          if (r === 'ok') live.delete(s.rec.id)
        })
      }
      await yieldNow()
    }
  }
  // Swaps: replace the customer's participant row on a live session.
  const swapper = async (c: number) => {
    const node = nodes[c % 2]!
    while (!done) {
      const [s] = takeLive(1)
      if (s) {
        const customer = party(nextParty++)
        const next = { ...s.rec, customerPhone: customer, version: s.rec.version + 1 }
        const swap = { oldCustomerHash: hashParty(s.tenant.salt, s.rec.customerPhone), newCustomerHash: hashParty(s.tenant.salt, customer), newCustomerEnc: cipher.encrypt(customer) }
        await guarded('swap', async () => {
          const r = await updateSession(node, { prev: s.rec, next, swap, events: [] })
          note(`swap:${r}`)
          if (r === 'ok' && live.has(s.rec.id)) live.set(s.rec.id, { ...s, rec: next })
        })
      }
      await yieldNow()
    }
  }
  // Bulk inserts of live sessions on the same proxies (unique parties: the bulk path trusts them).
  const bulker = async (c: number) => {
    const node = nodes[c % 2]!
    while (!done) {
      const k = Math.floor(Math.random() * tenants.length)
      const tenant = tenants[k]!
      const rows = Array.from({ length: 12 }, (_, i) => {
        const rec = { ...record(tenant, { proxy: proxyOf(k, i), agent: party(nextParty++), customer: party(nextParty++) }), gracePeriodMinutes: 0 }
        return { rec, agentHash: hashParty(tenant.salt, rec.agentPhone), customerHash: hashParty(tenant.salt, rec.customerPhone), agentEnc: cipher.encrypt(rec.agentPhone), customerEnc: cipher.encrypt(rec.customerPhone) }
      })
      await guarded('bulk', async () => {
        await bulkInsertSessions(node, rows, { chunkSize: 4, parallel: 2 })
        note('bulk:ok')
        for (const r of rows) live.set(r.rec.id, { rec: r.rec, tenant })
      })
      await yieldNow()
    }
  }

  const started = Date.now()
  const background = [...[0, 1, 2, 3].map(sweeper), ...[0, 1].map(ender), swapper(0), bulker(1)]
  await Promise.all(Array.from({ length: 8 }, (_, c) => creator(c)))
  done = true
  await Promise.all(background)
  // Whatever is left expires, so the counters must come back to 0.
  await expireSessions(db.pool, [...live.values()].map(b => ({ ...b.rec, state: 'EXPIRED' as const, expiredAt: Date.now(), version: b.rec.version + 1 })),
    r => [envelope(r, 'session.expired')])
  t.comment(`workload ${Date.now() - started} ms: ${[...outcomes].map(([k, v]) => `${k}=${v}`).sort().join(' ')}`)

  t.ok((outcomes.get('create:ok') ?? 0) > CREATES / 4, 'most creates went through')
  t.ok(outcomes.get('expire:batch'), 'expiry sweeps ran')
  t.ok(outcomes.get('end:ok'), 'single-session ends ran')
  t.ok(outcomes.get('bulk:ok'), 'bulk inserts ran')
  t.same(failures, [], 'no operation failed (a deadlock retried 4 times would show here)')
  t.same(seen.filter(c => c === '40P01'), [], 'no deadlock error (40P01) reached either pool')

  // The counters equal what they count, and everything expired released everything.
  t.equal(await count(db.pool, 'sessions', sql.fragment`state IN ('PENDING','ACTIVE','GRACE_PERIOD')`), 0, 'no live session left')
  t.same(await db.pool.anyFirst(sql.unsafe`SELECT live_sessions FROM tenants ORDER BY id`), [0, 0], 'tenant counters back to 0')
  t.equal(await count(db.pool, 'proxy_numbers', sql.fragment`live_sessions <> 0 OR tenant_id IS NOT NULL`), 0, 'every proxy released')
  t.equal(await count(db.pool, 'session_participants'), 0, 'no participant row left')
  t.equal(await count(db.pool, 'outbox', sql.fragment`type = 'session.expired'`), await count(db.pool, 'sessions', sql.fragment`state = 'EXPIRED'`),
    'one session.expired per expired session')

  if (!postgres) {
    t.comment('embedded (PGlite, one backend): deadlocks cannot happen; pg_stat_database is not checked')
    return
  }
  // A backend reports its deadlocks to pg_stat_database at its next flush (PG 15: at most once a
  // second while busy, ~10 s when idle) or when it exits: end the pools, wait until their backends
  // are gone (they flush before they leave pg_stat_activity), then read.
  await Promise.all(nodes.map(p => p.end()))
  for (let i = 0; i < 100; i++) {
    const others = await db.pool.oneFirst(sql.unsafe`
      SELECT count(*) FROM pg_stat_activity
      WHERE datname = current_database() AND pid <> pg_backend_pid() AND NOT pid = ANY(${sql.array(ownBackends as number[], 'int4')})`)
    if (Number(others) === 0) break
    await new Promise(r => setTimeout(r, 50))
  }
  await db.pool.query(sql.unsafe`SELECT pg_stat_force_next_flush()`)
  const after = await deadlocks()
  t.comment(`pg_stat_database.deadlocks: before ${before}, after ${after}`)
  t.equal(after - before, 0, 'Postgres detected no deadlock')
})
