// openDatabase: how values come back (type parsers), and the embedded server's guarantees: one
// connection's extended-protocol batch or transaction never interleaves with another's
// (electric-sql/pglite#1046), an idle transaction cannot block everyone, one process per DATA_DIR.
import t from 'tap'
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as delay } from 'node:timers/promises'
import pg from 'pg'
import { sql } from 'slonik'
import { PGlite } from '@electric-sql/pglite'
import { EMBEDDED_SHARED_BUFFERS, openDatabase, parseTimestampMs } from '../../sql/db.js'
import { serveEmbedded } from '../../sql/pglite-server.js'
import { testDatabase, testDatabaseUrl } from '../support/db.js'

t.test('parseTimestampMs reads every ISO output of Postgres', async t => {
  t.equal(parseTimestampMs('2026-01-15 12:00:00+00'), Date.UTC(2026, 0, 15, 12))
  t.equal(parseTimestampMs('2026-01-15 12:00:00.123456+00'), Date.UTC(2026, 0, 15, 12, 0, 0, 123), 'microseconds truncate')
  t.equal(parseTimestampMs('2026-01-15 12:00:00.5+05:30'), Date.UTC(2026, 0, 15, 6, 30, 0, 500))
  t.equal(parseTimestampMs('2026-01-15 07:00:00-05'), Date.UTC(2026, 0, 15, 12))
  t.equal(parseTimestampMs('1900-01-01 00:00:00+00:09:21'), Date.UTC(1900, 0, 1) - 561_000, 'LMT offsets with seconds')
  t.equal(parseTimestampMs('0044-03-15 12:00:00+00 BC'), (() => { const d = new Date(0); d.setUTCFullYear(-43, 2, 15); d.setUTCHours(12); return d.getTime() })())
  t.equal(parseTimestampMs('2026-01-15 12:00:00'), Date.UTC(2026, 0, 15, 12), 'timestamp without zone is UTC')
  t.equal(parseTimestampMs('infinity'), Infinity)
  t.throws(() => parseTimestampMs('Jan 15 2026'))
})

t.test('values come back as documented, whatever the session time zone', async t => {
  const db = await testDatabase(t)
  const row = await db.pool.transaction(async tx => {
    await tx.query(sql.unsafe`SET LOCAL TimeZone = 'America/New_York'`)
    return tx.one(sql.unsafe`
      SELECT '2026-07-01T12:00:00.123Z'::timestamptz AS at, '2026-07-01T12:00:00Z'::timestamp AS plain,
             count(*) AS n, 9007199254740991::int8 AS big, 0.1::numeric + 0.2::numeric AS exact,
             '2026-07-01'::date AS day, '{"a":1}'::jsonb AS doc, '\\x0102'::bytea AS raw,
             ARRAY['2026-07-01T00:00:00Z'::timestamptz] AS stamps
      FROM (VALUES (1), (2)) v(x)`)
  })
  t.same(row, {
    at: Date.UTC(2026, 6, 1, 12, 0, 0, 123), plain: Date.UTC(2026, 6, 1, 12), n: 2, big: 9007199254740991,
    exact: '0.3', day: '2026-07-01', doc: { a: 1 }, raw: Buffer.from([1, 2]), stamps: [Date.UTC(2026, 6, 1)],
  })
  t.equal(db.kind, testDatabaseUrl() ? 'postgres' : 'embedded')
})

t.test('concurrent batches and transactions on many connections never interleave', async t => {
  const db = await testDatabase(t, { maximumPoolSize: 8 })
  const other = await db.createPool({ maximumPoolSize: 8 })
  await db.pool.query(sql.unsafe`CREATE TABLE mux_probe (k int PRIMARY KEY, v text NOT NULL)`)
  // 100 kB parameters span several TCP packets: the case where the stock pglite-socket queue
  // lets another connection's Parse land between this one's Parse and Bind.
  const big = 'x'.repeat(100_000)
  let wrong = 0
  await Promise.all(Array.from({ length: 120 }, async (_, i) => {
    const pool = i % 2 ? db.pool : other
    if (i % 3 === 0) {
      if ((await pool.oneFirst(sql.unsafe`SELECT length(${big + i}::text)`)) !== 100_000 + String(i).length) wrong++
    } else if (i % 3 === 1) {
      if ((await pool.oneFirst(sql.unsafe`SELECT ${i}::int + 1`)) !== i + 1) wrong++
    } else {
      await pool.transaction(async tx => {
        await tx.query(sql.unsafe`INSERT INTO mux_probe (k, v) VALUES (${i}, ${big.slice(0, 70_000 + i)})`)
        if ((await tx.oneFirst(sql.unsafe`SELECT length(v) FROM mux_probe WHERE k = ${i}`)) !== 70_000 + i) wrong++
      })
    }
  }))
  t.equal(wrong, 0, 'every answer belongs to its own query')
  t.equal(await db.pool.oneFirst(sql.unsafe`SELECT count(*) FROM mux_probe`), 40)
})

function templateSeed(): Blob | null {
  const f = readdirSync(tmpdir()).find(n => n.startsWith('maskline-pglite-') && n.endsWith('.tar'))
  return f ? new Blob([readFileSync(join(tmpdir(), f))]) : null
}

t.test('embedded: a connection idle in a transaction is cut so others proceed', { skip: testDatabaseUrl() ? 'embedded only' : false }, async t => {
  await testDatabase(t) // makes sure the migrated template dump exists
  const seed = templateSeed()
  const lite = await PGlite.create(seed ? { loadDataDir: seed } : {})
  const codes: string[] = []
  const server = await serveEmbedded(lite, { idleInTransactionMs: 300, onError: c => codes.push(c) })
  t.teardown(async () => {
    await server.close()
    await lite.close()
  })
  const connect = async () => {
    const c = new pg.Client({ host: server.host, port: server.port, user: 'postgres', database: 'postgres' })
    await c.connect()
    return c
  }
  const holder = await connect()
  const holderError = new Promise<Error>(resolve => holder.on('error', resolve))
  const waiter = await connect()
  t.teardown(() => waiter.end())
  await waiter.query('CREATE TABLE idle_probe (k int)')
  await holder.query('BEGIN')
  await holder.query('INSERT INTO idle_probe VALUES (1)')
  const started = Date.now()
  const res = await waiter.query('SELECT count(*)::int AS n FROM idle_probe')
  t.ok(Date.now() - started >= 250, 'the waiter was blocked while the transaction was open')
  t.same(res.rows, [{ n: 0 }], "the cut transaction's insert was rolled back")
  t.match(await holderError, Error, 'the holder lost its connection')
  t.ok(codes.includes('idle-in-transaction'))
})

t.test('embedded: the buffer pool is the small one the service sets, not Postgres\'s 128MB', { skip: testDatabaseUrl() ? 'embedded only' : false }, async t => {
  // PGlite's pool is resident memory of the service itself (sql/db.ts EMBEDDED_SHARED_BUFFERS).
  const db = await testDatabase(t)
  t.equal(await db.pool.oneFirst(sql.unsafe`SELECT current_setting('shared_buffers')`), EMBEDDED_SHARED_BUFFERS)
  t.equal(await db.pool.oneFirst(sql.unsafe`SELECT source FROM pg_settings WHERE name = 'shared_buffers'`), 'command line')
})

t.test('embedded: one process per DATA_DIR, data survives a reopen', { skip: testDatabaseUrl() ? 'embedded only' : false }, async t => {
  await testDatabase(t)
  const seed = templateSeed() ?? undefined
  const dir = mkdtempSync(join(tmpdir(), 'maskline-lock-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const first = await openDatabase({ dataDir: dir, embeddedSeed: seed })
  await t.rejects(openDatabase({ dataDir: dir, embeddedSeed: seed }), /DATA_DIR is in use by process/)
  await first.pool.query(sql.unsafe`CREATE TABLE keep_probe (k int)`)
  await first.pool.query(sql.unsafe`INSERT INTO keep_probe VALUES (42)`)
  await first.close()
  await delay(10)
  const again = await openDatabase({ dataDir: dir, embeddedSeed: seed })
  t.teardown(() => again.close())
  t.equal(await again.pool.oneFirst(sql.unsafe`SELECT k FROM keep_probe`), 42)
})
