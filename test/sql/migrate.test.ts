// Migrations: applied once even when two processes start together; statements split correctly.
import t from 'tap'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { tmpdir } from 'node:os'
import { sql } from 'slonik'
import { migrate, readMigrations, splitSqlStatements } from '../../sql/migrate.js'
import { getSession } from '../../sql/sessions.js'
import { testDatabase } from '../support/db.js'

// One name a line: migrations added side by side (issue #16: 007 and 008) touch separate lines.
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

t.test('005, 010, 012: the write-hot tables carry no foreign keys, call_records one time index fewer; unknown sessions are still refused', async t => {
  const db = await testDatabase(t)
  const fks = await db.pool.anyFirst(sql.unsafe`
    SELECT conrelid::regclass || '.' || conname FROM pg_constraint
    WHERE contype = 'f' AND conrelid::regclass::text IN ('call_records', 'sms_records', 'outbox', 'sessions', 'billing_events') ORDER BY 1`)
  t.same(fks, [], 'no foreign key on call_records, sms_records (005), outbox (010), sessions and billing_events (012)')
  const sessionIndexes = await db.pool.anyFirst(sql.unsafe`SELECT indexrelid::regclass::text FROM pg_index WHERE indrelid = 'sessions'::regclass ORDER BY 1`)
  t.notOk(sessionIndexes.includes('sessions_customer_hash'), 'sessions_customer_hash dropped (012): sessions_pair_recent leads with the customer hash')
  const indexes = await db.pool.anyFirst(sql.unsafe`SELECT indexrelid::regclass::text FROM pg_index WHERE indrelid = 'call_records'::regclass ORDER BY 1`)
  t.same(indexes, ['call_records_pkey', 'call_records_provider_call_id_key', 'call_records_session', 'call_records_tenant_id', 'call_records_tenant_initiated'])
  // What the record inserts call for a row without its session (sql/record-apply.ts): SQLSTATE
  // 23503, as the dropped keys raised, naming ids only.
  const err = await db.pool.query(sql.unsafe`SELECT refuse_record_without_session('call_records', '0190b000-0000-7000-8000-000000000001')`)
    .then(() => null, (e: unknown) => e as { cause?: { code?: string; message?: string } })
  t.equal(err?.cause?.code, '23503')
  t.match(err?.cause?.message, /call_records refused: no session 0190b000-0000-7000-8000-000000000001 of this tenant/)
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
