// sql/direct.ts, the plain `pg` path of the hot statements (no global monkey-patch):
// a statement marked with PREPARE is a named statement on real Postgres (parsed once per
// connection, its plan cached) and stays unnamed on the embedded server; rows read exactly as
// through slonik's pools; `one`/`maybeOne` keep slonik's meaning; a transaction commits or rolls
// back as a whole; and nothing outside this module is touched (a pg client of its own sends a
// marked text unnamed); a statement a migration made stale fails once, as retryable, and the
// connection holding it is replaced.
import t from 'tap'
import pg from 'pg'
import { sql } from 'slonik'
import { directPool, directTransaction, PREPARE } from '../../sql/direct.js'
import { staleStatement, StoreError, toStoreError } from '../../sql/errors.js'
import { testDatabase } from '../support/db.js'

const PREPARED = sql.unsafe`SELECT name, statement FROM pg_prepared_statements WHERE statement LIKE '/* prepared */%'`

t.test('a marked statement is prepared once per connection on Postgres, never on the embedded server', async t => {
  const db = await testDatabase(t, { maximumPoolSize: 1 })
  const d = directPool(db.pool)
  if (!d) { t.fail('no direct pool'); return }
  t.equal(d.named, db.kind === 'postgres')
  const marked = (n: number) => sql.unsafe`${PREPARE} SELECT ${n}::int + 1 AS v`
  const named = await directTransaction(d, async q => {
    t.equal(await q.maybeOneFirst(marked(1)), 2)
    t.equal(await q.maybeOneFirst(marked(41)), 42, 'the same statement again, with other values')
    t.equal(await q.maybeOneFirst(sql.unsafe`SELECT ${1}::int AS v`), 1, 'unmarked statements run as they are')
    return q.any(PREPARED)
  })
  if (db.kind === 'postgres') {
    t.equal(named.length, 1, 'one named statement, parsed once')
    t.match(named[0], { name: /^ml_[0-9a-f]{20}$/, statement: /SELECT \$1::int \+ 1 AS v/ })
  } else {
    t.same(named, [], 'the embedded backend is shared by every connection: nothing is left behind on it')
  }
  t.same(await db.pool.connect(c => c.any(PREPARED)), [], "slonik's own connections name nothing")
})

t.test('rows read as through slonik; one and maybeOne keep their meaning', async t => {
  const db = await testDatabase(t)
  const d = directPool(db.pool)
  if (!d) { t.fail('no direct pool'); return }
  const q = sql.unsafe`SELECT '2026-01-15 12:00:00.123+00'::timestamptz AS at, 9007199254740991::int8 AS big,
    '10.50'::numeric AS money, '2026-01-15'::date AS day, '{"a":1}'::jsonb AS doc, '\\x0102'::bytea AS raw, 7 AS n`
  const viaSlonik = await db.pool.one(q)
  const viaDirect = await d.queries.one(q)
  t.same(viaDirect, viaSlonik, 'the same values')
  t.same(viaDirect, { at: Date.UTC(2026, 0, 15, 12, 0, 0, 123), big: 9007199254740991, money: '10.50', day: '2026-01-15', doc: { a: 1 }, raw: Buffer.from([1, 2]), n: 7 })
  t.same(await d.queries.anyFirst(sql.unsafe`SELECT g FROM generate_series(1, 3) g`), [1, 2, 3])
  t.equal(await d.queries.maybeOne(sql.unsafe`SELECT 1 WHERE false`), null)
  await t.rejects(d.queries.one(sql.unsafe`SELECT 1 WHERE false`), new StoreError('not-found', 'no-rows'))
  await t.rejects(d.queries.maybeOne(sql.unsafe`SELECT g FROM generate_series(1, 2) g`), new StoreError('internal', 'several-rows'))
})

t.test('a transaction commits as a whole or not at all', async t => {
  const db = await testDatabase(t)
  const d = directPool(db.pool)
  if (!d) { t.fail('no direct pool'); return }
  await db.pool.query(sql.unsafe`CREATE TABLE direct_probe (n int PRIMARY KEY)`)
  await directTransaction(d, async q => {
    await q.query(sql.unsafe`INSERT INTO direct_probe VALUES (${1})`)
    await q.query(sql.unsafe`INSERT INTO direct_probe VALUES (${2})`)
  })
  await t.rejects(directTransaction(d, async q => {
    await q.query(sql.unsafe`INSERT INTO direct_probe VALUES (${3})`)
    await q.query(sql.unsafe`INSERT INTO direct_probe VALUES (${1})`) // duplicate key
  }), { code: '23505' })
  t.same(await db.pool.anyFirst(sql.unsafe`SELECT n FROM direct_probe ORDER BY n`), [1, 2], 'the failed one left nothing')
  t.equal(await d.queries.maybeOneFirst(sql.unsafe`SELECT count(*) FROM direct_probe`), 2, 'the pool is usable after a rollback')
})

t.test('no global patch: a pg client of its own sends a marked text unnamed', async t => {
  const db = await testDatabase(t)
  const d = directPool(db.pool)
  if (!d || db.kind !== 'postgres') { t.pass('named statements exist on real Postgres only'); return }
  await d.queries.query(sql.unsafe`${PREPARE} SELECT 1 AS v`) // the module is loaded and used
  const client = new pg.Client({ connectionString: d.pool.options.connectionString })
  await client.connect()
  t.teardown(() => client.end())
  await client.query('/* prepared */ SELECT 2 AS v')
  t.same((await client.query(PREPARED.sql)).rows, [])
})

t.test('a statement a migration made stale costs one retry, not the connection for good', async t => {
  const db = await testDatabase(t, { maximumPoolSize: 1 })
  const d = directPool(db.pool)
  if (!d) { t.fail('no direct pool'); return }
  await db.pool.query(sql.unsafe`CREATE TABLE direct_stale (k text PRIMARY KEY)`)
  const insert = (k: string) => directTransaction(d, q => q.oneFirst(sql.unsafe`${PREPARE} INSERT INTO direct_stale VALUES (${k}) RETURNING k`))
  t.equal(await insert('a'), 'a')
  // What a migration may do under a running node: change the type of a column the statement returns.
  await db.pool.query(sql.unsafe`ALTER TABLE direct_stale ALTER COLUMN k TYPE text COLLATE "C"`)
  if (d.named) {
    const err = await insert('b').then(() => null, (e: unknown) => e)
    t.ok(staleStatement(err), 'the named statement fails once: its result type changed since it was parsed')
    t.equal(toStoreError(err).slug, 'retryable', 'as a transaction to run again')
  }
  t.equal(await insert('c'), 'c', 'the next transaction gets a connection that parses it afresh')
  t.equal(await insert('d'), 'd')
  t.same(await db.pool.anyFirst(sql.unsafe`SELECT k FROM direct_stale ORDER BY k`), ['a', 'c', 'd'], 'the failed one left nothing')
})
