// A migration that changes a column the record writer's statements return (here the collation of
// call_records.provider_call_id) while a node is running: the writer's named statements on its
// connections go stale (Postgres: "cached plan must not change result type"). Every call queued
// before and after is still written, once, and none is refused (sql/errors.ts staleStatement,
// sql/direct.ts). Both backends: the embedded server runs statements unnamed.
import t from 'tap'
import { sql } from 'slonik'
import { createRecordWriter, type CallInsert } from '../../sql/records.js'
import { uuidv7 } from '../../sql/vocabulary/ids.js'
import { testDatabase } from '../support/db.js'
import { count, hashParty, liveSession, T0 } from './fixtures.js'

t.test('calls are written across a migration that makes the writer\'s statements stale', async t => {
  const db = await testDatabase(t)
  const { tenant, rec } = await liveSession(db.pool, 81)
  const calls = Array.from({ length: 8 }, (_, i): CallInsert => ({
    id: uuidv7(T0 + i), sessionId: rec.id, tenantId: tenant.id, providerCallId: `CA-stale-${rec.id}-${i}`, status: 'RINGING',
    direction: 'A_TO_B', initiatedAt: T0 + i, partyBHash: hashParty(tenant.salt, rec.customerPhone), proxy: rec.proxyNumber,
  }))
  const call = (i: number) => calls[i]!
  const errors: string[] = []
  const w = createRecordWriter(db.pool, { retryMs: { first: 5, max: 50 }, onError: c => errors.push(c) })
  t.teardown(() => w.close())

  // A batch with callbacks runs in a transaction on one connection (sql/direct.ts directTransaction);
  // a batch of new calls alone is one statement on the pool.
  const batch = (ids: number[]) => Promise.all(ids.flatMap(i => [
    w.upsertCall(call(i)),
    w.callEvent({ key: { callId: call(i).id }, source: 'status', value: 'in-progress', at: T0 + i + 1000 }),
  ]))
  t.same(await batch([0, 1, 2]), [0, 1, 2].flatMap(i => [call(i).id, true]), 'written before the migration')
  await db.pool.query(sql.unsafe`ALTER TABLE call_records ALTER COLUMN provider_call_id TYPE text COLLATE "C"`)
  t.same(await batch([3, 4, 5]), [3, 4, 5].flatMap(i => [call(i).id, true]), 'written after it, each with its own id')
  t.same(await w.upsertCall(call(1)), call(1).id, 'a replayed CallSid still finds its row')
  t.same(await batch([6, 7]), [6, 7].flatMap(i => [call(i).id, true]), 'and the batches after that')
  t.equal(await count(db.pool, 'call_records', sql.fragment`session_id = ${rec.id} AND status = 'ANSWERED'`), 8, 'every call, once, answered')
  t.equal(w.stats().refused, 0, 'nothing refused')
  t.notOk(errors.some(c => c !== '0A000'), `only the stale statement was reported (${errors.join(', ') || 'nothing'})`)
})
