// Migrations: applied once even when two processes start together; statements split correctly.
import t from 'tap'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { tmpdir } from 'node:os'
import { sql } from 'slonik'
import { migrate, readMigrations, splitSqlStatements } from '../../sql/migrate.js'
import { getSession } from '../../sql/sessions.js'
import { testDatabase } from '../support/db.js'

// One name a line: migrations added side by side (007 and 008) touch separate lines.
const SHIPPED = [
  '001_init.sql',
  '002_pricing_seed.sql',
  '003_sessions_fillfactor.sql',
  '004_node_journal.sql',
  '005_write_hot_diet.sql',
  '006_session_changes.sql',
  '007_sms_opt_out.sql',
  '008_session_options.sql',
  '009_pool_alerts.sql',
  '010_outbox_without_tenant_key.sql',
  '011_call_count_from_records.sql',
  '012_create_diet.sql',
  '013_check_domains.sql',
  '014_unread_session_indexes.sql',
  '015_create_batch.sql',
  '016_records_without_session_probe.sql',
  '017_dual_proxy.sql',
  '018_twilio_proxy.sql',
]

t.test('splitSqlStatements respects quotes, dollar quotes and comments', async t => {
  t.same(splitSqlStatements('SELECT 1; SELECT 2;\n'), ['SELECT 1', 'SELECT 2'])
  t.same(splitSqlStatements(`-- a; comment\nSELECT ';' AS a; /* x; /* nested; */ y; */ SELECT "a;b" FROM t`),
    [`-- a; comment\nSELECT ';' AS a`, `/* x; /* nested; */ y; */ SELECT "a;b" FROM t`])
  t.same(splitSqlStatements(`DO $body$ BEGIN PERFORM 1; END $body$; SELECT $$;$$; SELECT E'it\\'s; fine'`),
    [`DO $body$ BEGIN PERFORM 1; END $body$`, `SELECT $$;$$`, `SELECT E'it\\'s; fine'`])
  t.same(splitSqlStatements(`SELECT 'it''s; ok'; SELECT $1`), [`SELECT 'it''s; ok'`, `SELECT $1`])
  t.same(splitSqlStatements('-- only a comment\n;  ;'), [])
})

t.test('the shipped migrations split into plain statements', async t => {
  const files = readMigrations()
  t.same(files.map(f => f.name), SHIPPED)
  for (const f of files) {
    const statements = splitSqlStatements(f.text)
    t.ok(statements.length > 0, f.name)
    t.notOk(statements.some(s => s.endsWith(';')), `${f.name}: no statement keeps its semicolon`)
  }
})

t.test('two pools migrating one empty database at once apply each migration once', async t => {
  const db = await testDatabase(t)
  // Start from an empty schema (the test database comes migrated).
  await db.pool.query(sql.unsafe`DROP SCHEMA public CASCADE`)
  await db.pool.query(sql.unsafe`CREATE SCHEMA public`)
  const other = await db.createPool({ maximumPoolSize: 2 })
  const [a, b, c] = await Promise.all([migrate(db.pool), migrate(other), migrate(other)])
  t.same([...a, ...b, ...c].sort(), SHIPPED, 'each file applied by exactly one caller')
  t.same(await db.pool.anyFirst(sql.unsafe`SELECT version FROM schema_migrations ORDER BY version`), SHIPPED.map(f => f.slice(0, 3)))
  t.equal(await db.pool.oneFirst(sql.unsafe`SELECT count(*) FROM pricing`), 18, 'the seed ran once')
  t.same(await migrate(db.pool), [], 'nothing left to apply')
})

t.test('an applied migration that was edited afterwards is refused', async t => {
  const db = await testDatabase(t)
  const dir = mkdtempSync(join(tmpdir(), 'maskline-migrations-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  for (const f of readMigrations()) writeFileSync(join(dir, f.name), f.name === '002_pricing_seed.sql' ? `${f.text}\n-- edited\n` : f.text)
  await t.rejects(migrate(db.pool, dir), /002_pricing_seed.sql was changed after it was applied/)
  writeFileSync(join(dir, '999_extra.sql'), 'CREATE TABLE extra_probe (id int);')
  for (const f of readMigrations()) writeFileSync(join(dir, f.name), f.text)
  t.same(await migrate(db.pool, dir), ['999_extra.sql'], 'new files apply after the existing ones')
})

t.test('005, 010, 012, 016: the write-hot tables carry no foreign keys nor a probe in their place, call_records one time index fewer', async t => {
  const db = await testDatabase(t)
  const fks = await db.pool.anyFirst(sql.unsafe`
    SELECT conrelid::regclass || '.' || conname FROM pg_constraint
    WHERE contype = 'f' AND conrelid::regclass::text IN ('call_records', 'sms_records', 'outbox', 'sessions', 'billing_events') ORDER BY 1`)
  t.same(fks, [], 'no foreign key on call_records, sms_records (005), outbox (010), sessions and billing_events (012)')
  const sessionIndexes = await db.pool.anyFirst(sql.unsafe`SELECT indexrelid::regclass::text FROM pg_index WHERE indrelid = 'sessions'::regclass ORDER BY 1`)
  t.notOk(sessionIndexes.includes('sessions_customer_hash'), 'sessions_customer_hash dropped (012): sessions_pair_recent leads with the customer hash')
  const indexes = await db.pool.anyFirst(sql.unsafe`SELECT indexrelid::regclass::text FROM pg_index WHERE indrelid = 'call_records'::regclass ORDER BY 1`)
  t.same(indexes, ['call_records_pkey', 'call_records_provider_call_id_key', 'call_records_session', 'call_records_tenant_id', 'call_records_tenant_initiated'])
  // 016: the record inserts no longer probe the session of each row (sql/record-apply.ts).
  t.equal(await db.pool.oneFirst(sql.unsafe`SELECT count(*)::int FROM pg_proc WHERE proname = 'refuse_record_without_session'`), 0)
})

t.test('014: every index of sessions has a reader (each one is written by every create)', async t => {
  const db = await testDatabase(t)
  // Who reads each: test/sql/query-plans.test.ts checks the plans that use them.
  const readers: Record<string, string> = {
    sessions_pkey: 'reads and writes by id',
    sessions_tenant_created: 'GET /v1/sessions, analytics sessions over time',
    sessions_tenant_state_created: 'GET /v1/sessions?state',
    sessions_agent_hash: 'GET /v1/sessions/verify (agents)',
    sessions_pair_recent: 'sticky proxy, GET /v1/sessions/verify (customers)',
    sessions_change_xid: 'the reconcile sweep (api/app/reconcile.ts)',
  }
  const indexes = await db.pool.anyFirst(sql.unsafe`SELECT indexrelid::regclass::text FROM pg_index WHERE indrelid = 'sessions'::regclass ORDER BY 1`)
  t.same(indexes, Object.keys(readers).sort(), 'sessions_live_id and sessions_live_expiry dropped (014); no index without a reader')
})

t.test('013: the rules of the tables a create writes are domains, still enforced; clients see the base types', async t => {
  const db = await testDatabase(t)
  // Table CHECKs are rebuilt per statement for every constraint of the table (ExecRelCheck): only
  // the two-column rules stay table constraints on the tables a create writes.
  const checks = await db.pool.anyFirst(sql.unsafe`
    SELECT conrelid::regclass || '.' || conname FROM pg_constraint
    WHERE contype = 'c' AND conrelid::regclass::text IN ('tenants', 'proxy_numbers', 'sessions', 'billing_events', 'outbox') ORDER BY 1`)
  t.same(checks, ['sessions.sessions_r_rec', 'tenants.tenants_r_rec'])
  const tenant = '0190a000-0000-7000-8000-000000000013'
  const other = '0190a000-0000-7000-8000-000000000014'
  const sessionId = '0190b000-0000-7000-8000-000000000013'
  await db.pool.query(sql.unsafe`INSERT INTO tenants (id, name, salt, tier) VALUES (${tenant}, 'm013', '\\x00'::bytea, 'GROWTH')`)
  await db.pool.query(sql.unsafe`INSERT INTO proxy_numbers (number, region, tenant_id, live_sessions) VALUES ('+15550001301', 'US', ${tenant}, 1)`)
  const insertSession = (over: Record<string, string>) => sql.unsafe`
    INSERT INTO sessions (id, tenant_id, proxy_number, state, direction_mode, grace_period_minutes, max_duration_minutes,
      recording_enabled, consent_prompt, agent_phone_enc, customer_phone_enc, agent_hash, customer_hash, expires_at, created_at,
      activated_at, channels, inactivity_timeout_minutes)
    VALUES (${over['id'] ?? sessionId}, ${tenant}, '+15550001301', ${over['state'] ?? 'ACTIVE'}, ${over['direction'] ?? 'BIDIRECTIONAL'},
      15, 1440, ${over['recording'] === 'true'}, ${over['consent'] ?? 'DEFAULT'}, '\\x00'::bytea, '\\x00'::bytea, 'a', 'c', now(), now(), now(),
      ${Number(over['channels'] ?? 3)}, ${over['idle'] === undefined ? null : Number(over['idle'])})`
  await db.pool.query(insertSession({}))
  const code = (q: Promise<unknown>) => q.then(() => 'ok', (e: { cause?: { code?: string } }) => e.cause?.code)
  const refused: Array<[string, () => Promise<unknown>]> = [
    ['tenants.tier', () => db.pool.query(sql.unsafe`UPDATE tenants SET tier = 'PLATINUM' WHERE id = ${tenant}`)],
    ['tenants.status', () => db.pool.query(sql.unsafe`INSERT INTO tenants (id, name, salt, status) VALUES (${other}, 'm013b', '\\x00'::bytea, 'GONE')`)],
    ['tenants.expired_call_behavior', () => db.pool.query(sql.unsafe`UPDATE tenants SET expired_call_behavior = 'HANG' WHERE id = ${tenant}`)],
    ['tenants.recording_consent_mode', () => db.pool.query(sql.unsafe`UPDATE tenants SET recording_consent_mode = 'LOUD' WHERE id = ${tenant}`)],
    ['tenants.live_sessions', () => db.pool.query(sql.unsafe`UPDATE tenants SET live_sessions = live_sessions - 1 WHERE id = ${tenant}`)],
    ['tenants_r_rec', () => db.pool.query(sql.unsafe`UPDATE tenants SET recording_enabled = true, recording_consent_mode = 'NONE' WHERE id = ${tenant}`)],
    ['proxy_numbers.live_sessions', () => db.pool.query(sql.unsafe`UPDATE proxy_numbers SET live_sessions = live_sessions - 2 WHERE number = '+15550001301'`)],
    ['sessions.state', () => db.pool.query(insertSession({ id: other, state: 'LIVE' }))],
    ['sessions.direction_mode', () => db.pool.query(insertSession({ id: other, direction: 'BOTH' }))],
    ['sessions.consent_prompt', () => db.pool.query(insertSession({ id: other, consent: 'LOUD' }))],
    ['sessions.channels', () => db.pool.query(insertSession({ id: other, channels: '4' }))],
    ['sessions.inactivity_timeout_minutes', () => db.pool.query(insertSession({ id: other, idle: '0' }))],
    ['sessions_r_rec', () => db.pool.query(insertSession({ id: other, recording: 'true', consent: 'NONE' }))],
    ['sessions.state (update)', () => db.pool.query(sql.unsafe`UPDATE sessions SET state = 'DONE' WHERE id = ${sessionId}`)],
    ['billing_events.metric', () => db.pool.query(sql.unsafe`
      INSERT INTO billing_events (id, tenant_id, billing_period_id, metric, quantity, recorded_at)
      VALUES (gen_random_uuid(), ${tenant}, gen_random_uuid(), 'sms_lost', 1, now())`)],
    ['outbox.outcome', () => db.pool.query(sql.unsafe`
      INSERT INTO outbox (id, tenant_id, type, envelope, outcome) VALUES (gen_random_uuid(), ${tenant}, 'x', '{}'::jsonb, 'lost')`)],
  ]
  for (const [what, q] of refused) t.equal(await code(q()), '23514', `${what}: refused as a check violation`)
  t.same(await code(db.pool.query(sql.unsafe`UPDATE tenants SET tier = 'ENTERPRISE', live_sessions = live_sessions + 1 WHERE id = ${tenant}`)), 'ok')
  t.same(await db.pool.one(sql.unsafe`
    SELECT t.tier, t.live_sessions, s.state, s.channels, s.inactivity_timeout_minutes, p.live_sessions AS proxy_live
    FROM tenants t JOIN sessions s ON s.tenant_id = t.id JOIN proxy_numbers p ON p.number = s.proxy_number WHERE t.id = ${tenant}`),
  { tier: 'ENTERPRISE', live_sessions: 1, state: 'ACTIVE', channels: 3, inactivity_timeout_minutes: null, proxy_live: 1 },
  'strings and numbers as before: the wire describes a domain column by its base type')
})

t.test('011: counts kept before it stay exact, purged calls included', async t => {
  const db = await testDatabase(t)
  await db.pool.query(sql.unsafe`DROP SCHEMA public CASCADE`)
  await db.pool.query(sql.unsafe`CREATE SCHEMA public`)
  const dir = mkdtempSync(join(tmpdir(), 'maskline-migrations-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  for (const f of readMigrations().filter(f => f.version < '011')) writeFileSync(join(dir, f.name), f.text)
  await migrate(db.pool, dir)
  const tenant = '0190a000-0000-7000-8000-000000000001'
  const session = (i: number) => `0190b000-0000-7000-8000-00000000000${i}`
  await db.pool.query(sql.unsafe`INSERT INTO tenants (id, name, salt) VALUES (${tenant}, 'm011', '\\x00'::bytea)`)
  await db.pool.query(sql.unsafe`INSERT INTO proxy_numbers (number, region, tenant_id) VALUES ('+15550000001', 'US', ${tenant})`)
  // Before 011 every call bumped call_count / last_call_at with its record: session 1 had five
  // calls of which the purge deleted three records, session 2 two calls and both records, 3 none.
  for (const [i, count, last] of [[1, 5, '2026-01-03 10:00:00+00'], [2, 2, '2026-01-02 10:00:00+00'], [3, 0, null]] as const) {
    await db.pool.query(sql.unsafe`
      INSERT INTO sessions (id, tenant_id, proxy_number, state, direction_mode, grace_period_minutes, max_duration_minutes,
        recording_enabled, consent_prompt, agent_phone_enc, customer_phone_enc, agent_hash, customer_hash, expires_at, created_at,
        activated_at, call_count, last_call_at)
      VALUES (${session(i)}, ${tenant}, '+15550000001', 'EXPIRED', 'BIDIRECTIONAL', 15, 1440, false, 'DEFAULT', '\\x00'::bytea,
        '\\x00'::bytea, ${`a${i}`}, ${`c${i}`}, now(), now(), now(), ${count}, ${last}::timestamptz)`)
  }
  for (const [i, k, at] of [[1, 1, '2026-01-02 09:00:00+00'], [1, 2, '2026-01-03 10:00:00+00'], [2, 1, '2026-01-01 10:00:00+00'], [2, 2, '2026-01-02 10:00:00+00']] as const) {
    await db.pool.query(sql.unsafe`
      INSERT INTO call_records (id, session_id, tenant_id, provider_call_id, status, direction, initiated_at, party_b_hash)
      VALUES (gen_random_uuid(), ${session(i)}, ${tenant}, ${`m011-${i}-${k}`}, 'COMPLETED', 'A_TO_B', ${at}::timestamptz, 'h')`)
  }
  t.same(await migrate(db.pool), readMigrations().filter(f => f.version >= '011').map(f => f.name))
  const rows = await db.pool.any(sql.unsafe`SELECT id, purged_calls FROM sessions ORDER BY id`)
  t.same(rows.map(r => r['purged_calls']), [3, 0, 0], 'only the calls without their records are carried')
  for (const [i, count, last] of [[1, 5, Date.UTC(2026, 0, 3, 10)], [2, 2, Date.UTC(2026, 0, 2, 10)], [3, 0, null]] as const) {
    t.same(await getSession(db.pool, tenant, session(i)).then(v => [v?.callCount, v?.lastCallAt]), [count, last === null ? null : new Date(last).toISOString()], `session ${i}`)
  }
})
