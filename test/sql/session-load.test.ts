// The boot load (sql/session-load.ts loadLiveSessions: one binary COPY, decoded in place): every
// live session exactly once, each record exactly as getSessionRecord reads it (timestamps to the
// millisecond, sub-millisecond and pre-2000 ones included), each with its view extras (contract D4:
// metadata as jsonb text, callCount and lastCallAt from the call records and purged calls) at the same position, on both backends.
import { Socket } from 'node:net'
import t from 'tap'
import pg from 'pg'
import { sql } from 'slonik'
import type { E164, SessionRecord } from '../../engine/types.js'
import { bulkInsertSessions, getSessionRecord, loadLiveSessions, type BulkSessionRow } from '../../sql/sessions.js'
import type { LiveExtra } from '../../sql/session-load.js'
import { testDatabase, testDatabaseUrl } from '../support/db.js'
import { addNumbers, addTenant, cipher, hashParty, MINUTE, party, proxy, record, T0 } from './fixtures.js'

const LIVE = 1_500

t.test('loadLiveSessions', async t => {
  const db = await testDatabase(t)
  await addNumbers(db.pool, 100)
  const tenant = await addTenant(db.pool, 'ENTERPRISE')
  const rows: BulkSessionRow[] = []
  const metadataOf = (i: number): Record<string, unknown> | undefined =>
    i % 3 === 0 ? undefined : { orderId: `o-${i}`, nested: { n: i, ok: i % 2 === 0 }, 'é': 'ü ✓', z: null }
  const states: SessionRecord['state'][] = ['ACTIVE', 'PENDING', 'GRACE_PERIOD']
  for (let i = 0; i < LIVE + 300; i++) {
    const live = i < LIVE
    // Two parties per session, unique per proxy (contract 3.1); a few numbers of every E.164 length.
    const agent = (i % 97 === 0 ? `+4477009${String(i).padStart(5, '0')}` : i % 89 === 0 ? `+86131${String(i).padStart(10, '0')}` : party(2 * i)) as E164
    const rec = record(tenant, { proxy: proxy(i % 100), agent, customer: party(2 * i + 1), at: T0 + i * 1_001, state: live ? states[i % 3] : (i % 2 ? 'EXPIRED' : 'FAILED') })
    if (rec.state === 'GRACE_PERIOD') rec.endedAt = rec.createdAt + 5 * MINUTE
    if (!live) rec.expiredAt = rec.expiresAt
    rec.version = 1 + (i % 4)
    rec.recordingEnabled = i % 5 === 0
    rec.consentPrompt = i % 5 === 0 ? 'CUSTOM' : i % 7 === 0 ? 'NONE' : 'DEFAULT'
    rec.directionMode = (['BIDIRECTIONAL', 'A_TO_B_ONLY', 'B_TO_A_ONLY'] as const)[i % 3]!
    // contract D10: channel bits (absent: both) and the inactivity timeout (absent: none).
    if (i % 6 === 1) rec.channels = 1
    if (i % 6 === 2) rec.channels = 2
    if (i % 5 === 3) rec.inactivityTimeoutMinutes = 1 + (i * 37) % 10080
    rows.push({
      rec, agentHash: hashParty(tenant.salt, rec.agentPhone), customerHash: hashParty(tenant.salt, rec.customerPhone),
      agentEnc: cipher.encrypt(rec.agentPhone), customerEnc: cipher.encrypt(rec.customerPhone), ...(metadataOf(i) ? { metadata: metadataOf(i)! } : {}),
    })
  }
  await bulkInsertSessions(db.pool, rows)
  // What the text path and the binary path could disagree on: sub-millisecond digits, times before
  // 2000 (negative in binary), far future; and the call counters.
  // The counters (migration 011) are the session's call records plus its purged calls: records
  // for every 7th session (one to three, some before and some after the purged ones), purged calls
  // for the first 40.
  await db.pool.query(sql.unsafe`UPDATE sessions SET created_at = created_at + interval '999 microseconds',
    purged_calls = 3, purged_last_call_at = '2026-01-15 12:30:00.123456+00' WHERE id IN (SELECT id FROM sessions ORDER BY id LIMIT 40)`)
  await db.pool.query(sql.unsafe`
    INSERT INTO call_records (id, session_id, tenant_id, provider_call_id, status, direction, initiated_at, party_b_hash)
    SELECT gen_random_uuid(), s.id, s.tenant_id, 'load-' || s.id || '-' || k, 'COMPLETED', 'A_TO_B',
           timestamptz '2026-01-15 12:00:00.000001+00' + make_interval(mins => k * s.n), 'h'
    FROM (SELECT id, tenant_id, (row_number() OVER (ORDER BY id))::int AS n FROM sessions) s CROSS JOIN generate_series(1, 3) k
    WHERE s.n % 7 = 0 AND k <= 1 + s.n % 3`)
  await db.pool.query(sql.unsafe`UPDATE sessions SET activated_at = '1999-12-31 23:59:59.9995+00', purged_calls = 2147483647
    WHERE id = ${rows[4]!.rec.id}`)
  await db.pool.query(sql.unsafe`DELETE FROM call_records WHERE session_id IN (${rows[4]!.rec.id}, ${rows[5]!.rec.id})`)
  await db.pool.query(sql.unsafe`UPDATE sessions SET expires_at = '2999-01-01 00:00:00.000001+00', purged_last_call_at = '1969-07-20 20:17:40.5+00'
    WHERE id = ${rows[5]!.rec.id}`)

  const liveIds = new Set(rows.filter(r => ['ACTIVE', 'PENDING', 'GRACE_PERIOD'].includes(r.rec.state)).map(r => r.rec.id))
  t.equal(liveIds.size, LIVE)

  t.test('every live session once, as getSessionRecord reads it, extras in step', async t => {
    const recs: SessionRecord[] = []
    const extras: LiveExtra[] = []
    const sizes: number[] = []
    const n = await loadLiveSessions(db.pool, cipher, (r, x) => {
      t.equal(r.length, x.length, 'parallel arrays')
      sizes.push(r.length)
      recs.push(...r)
      extras.push(...x)
    }, 256)
    t.equal(n, LIVE)
    t.equal(recs.length, LIVE)
    t.same(new Set(recs.map(r => r.id)), liveIds, 'the live ones, each once')
    t.ok(sizes.slice(0, -1).every(s => s === 256) && sizes.at(-1)! <= 256, 'batches of batchSize, the last one smaller')

    const stored = new Map((await db.pool.any(sql.unsafe`
      SELECT s.id, s.metadata::text AS m, s.purged_calls + count(c.id)::int AS call_count,
             GREATEST(s.purged_last_call_at, max(c.initiated_at)) AS last_call_at
      FROM sessions s LEFT JOIN call_records c ON c.session_id = s.id GROUP BY s.id`) as readonly { id: string; m: string; call_count: number; last_call_at: number | null }[])
      .map(r => [r.id, { metadataJson: r.m, callCount: r.call_count, lastCallAt: r.last_call_at }]))
    let same = 0
    for (let i = 0; i < recs.length; i++) {
      const want = await getSessionRecord(db.pool, recs[i]!.id, cipher)
      if (t.same(recs[i], want, `record ${recs[i]!.id}`) && t.same(extras[i], stored.get(recs[i]!.id), `extras ${recs[i]!.id}`)) same++
    }
    t.equal(same, LIVE)
    // The first 40 by id have 3 purged calls; every 7th has 1-3 records: 5 of those 40 both.
    t.ok(extras.filter(x => x.callCount > 3).length >= 4 && extras.some(x => x.callCount > 0 && x.callCount < 3), 'records counted, with and without purged calls')
    t.ok(recs.some(r => r.channels === 1) && recs.some(r => r.channels === 2) && recs.some(r => r.inactivityTimeoutMinutes! > 0), 'contract D10 options read back')
    t.equal(recs.find(r => r.id === rows[1]!.rec.id)!.channels, 1)
    t.equal(recs.find(r => r.id === rows[3]!.rec.id)!.inactivityTimeoutMinutes, rows[3]!.rec.inactivityTimeoutMinutes)
    const edge = recs.find(r => r.id === rows[4]!.rec.id)!
    t.equal(edge.activatedAt, Date.UTC(1999, 11, 31, 23, 59, 59, 999), 'before 2000: the millisecond it falls in')
    t.equal(extras[recs.indexOf(edge)]!.callCount, 2147483647)
    const far = recs.indexOf(recs.find(r => r.id === rows[5]!.rec.id)!)
    t.equal(recs[far]!.expiresAt, Date.UTC(2999, 0, 1))
    t.equal(extras[far]!.lastCallAt, Date.UTC(1969, 6, 20, 20, 17, 40, 500))
    t.equal(extras.find((_, i) => recs[i]!.id === rows[3]!.rec.id)!.metadataJson, '{}', 'no metadata: {}')
    t.match(extras.find((_, i) => recs[i]!.id === rows[1]!.rec.id)!.metadataJson, /"é": "ü ✓"/, 'UTF-8 text as jsonb prints it')
  })

  t.test('read in many COPYs (a page each, one snapshot): the same sessions, once each', async t => {
    const pages = Number(await db.pool.oneFirst(sql.unsafe`SELECT pg_relation_size('sessions') / current_setting('block_size')::int8`))
    t.ok(pages > 20, `${pages} pages`)
    const ids: string[] = []
    let writes = 0
    const n = await loadLiveSessions(db.pool, cipher, async recs => {
      ids.push(...recs.map(r => r.id))
      // A session ended meanwhile, on a page not read yet, changes nothing: one snapshot. (Not
      // embedded: its one backend is the load's until the load's transaction ends.)
      if (writes++ === 0 && testDatabaseUrl()) await db.pool.query(sql.unsafe`UPDATE sessions SET state = 'EXPIRED', expired_at = now() WHERE id = ${rows[LIVE - 1]!.rec.id}`)
    }, 100, 1)
    t.equal(n, LIVE)
    t.same(new Set(ids), liveIds)
    t.equal(ids.length, LIVE)
    await db.pool.query(sql.unsafe`UPDATE sessions SET state = ${rows[LIVE - 1]!.rec.state}, expired_at = NULL WHERE id = ${rows[LIVE - 1]!.rec.id}`)
  })

  t.test('an async onBatch gets one batch at a time and is awaited', async t => {
    let running = 0
    let overlap = false
    const seen: string[] = []
    const n = await loadLiveSessions(db.pool, cipher, async recs => {
      if (running++ > 0) overlap = true
      await new Promise(resolve => setTimeout(resolve, 2))
      seen.push(...recs.map(r => r.id))
      running--
    }, 50)
    t.equal(n, LIVE)
    t.notOk(overlap, 'never two batches at once')
    t.equal(seen.length, LIVE, 'all handed over before it resolved')
  })

  t.test('what the load reaches inside pg is still there (a pg upgrade that moves it fails here)', async t => {
    // sql/session-load.ts pauses the COPY's socket while the engine takes a batch
    // (`client.connection.stream`) and reads CopyData through a Submittable's handleCopyData.
    const client = new pg.Client({ connectionString: db.pool.configuration.connectionUri })
    client.on('error', () => {})
    await client.connect()
    t.teardown(() => client.end().catch(() => {}))
    const stream = (client as unknown as { connection?: { stream?: unknown } }).connection?.stream
    t.ok(stream instanceof Socket, 'client.connection.stream is the connection\'s net.Socket')
    // A spy on the sockets' pause/resume for the length of one load with a slow engine.
    const { pause, resume } = Socket.prototype
    let paused = 0, resumed = 0
    Socket.prototype.pause = function (this: Socket) { paused++; return pause.call(this) }
    Socket.prototype.resume = function (this: Socket) { resumed++; return resume.call(this) }
    try {
      t.equal(await loadLiveSessions(db.pool, cipher, async () => { await new Promise(r => setTimeout(r, 1)) }, 10), LIVE)
    } finally {
      Object.assign(Socket.prototype, { pause, resume })
    }
    t.ok(paused > 0 && resumed > 0, `a slow engine paused the COPY's socket and resumed it (${paused} / ${resumed})`)
  })

  t.test('a throwing onBatch fails the load, and the next load works', async t => {
    await t.rejects(loadLiveSessions(db.pool, cipher, () => { throw new Error('engine refused') }, 100), /engine refused/)
    t.equal(await loadLiveSessions(db.pool, cipher, () => {}), LIVE)
  })

  t.test('a number altered at rest fails the boot instead of routing a wrong number', async t => {
    await db.pool.query(sql.unsafe`UPDATE sessions SET agent_phone_enc = set_byte(agent_phone_enc, 14, get_byte(agent_phone_enc, 14) # 1)
      WHERE id = ${rows[7]!.rec.id}`)
    await t.rejects(loadLiveSessions(db.pool, cipher, () => {}))
  })
})
