// sql/prepared.ts: a statement marked with PREPARE is a named statement on real Postgres (parsed
// once per connection, plan cached), and stays unnamed on the embedded server.
import t from 'tap'
import { sql } from 'slonik'
import { PREPARE } from '../../sql/prepared.js'
import { testDatabase } from '../support/db.js'

t.test('a marked statement is prepared once per connection on Postgres, never on the embedded server', async t => {
  const db = await testDatabase(t, { maximumPoolSize: 1 })
  const marked = (n: number) => sql.unsafe`${PREPARE} SELECT ${n}::int + 1 AS v`
  const named = await db.pool.connect(async c => {
    t.equal(await c.oneFirst(marked(1)), 2)
    t.equal(await c.oneFirst(marked(41)), 42, 'the same statement again, with other values')
    t.equal(await c.oneFirst(sql.unsafe`SELECT ${1}::int AS v`), 1, 'unmarked statements are untouched')
    return (await c.any(sql.unsafe`SELECT name, statement FROM pg_prepared_statements WHERE statement LIKE '/* prepared */%'`)) as readonly { name: string; statement: string }[]
  })
  if (db.kind === 'postgres') {
    t.equal(named.length, 1, 'one named statement, parsed once')
    t.match(named[0], { name: /^ml\d+_[0-9a-f]{20}$/, statement: /SELECT \$1::int \+ 1 AS v/ })
  } else {
    t.same(named, [], 'the embedded backend is shared by every connection: nothing is left behind on it')
  }
})
