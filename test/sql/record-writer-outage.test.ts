// contract D5: the record writer never forgets an operation it took. Postgres is taken away (a TCP
// proxy in front of the real server cuts every connection) while calls and their callbacks are
// queued: nothing is lost or applied twice once it is back, also past the memory bound (batches
// read back from the journal), a throw in a hub listener does not wedge the queue, and a writer that
// dies with operations on disk leaves them for the next boot to replay.
import t from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { sql, type DatabasePool } from 'slonik'
import { openDatabase } from '../../sql/db.js'
import { openJournal, readLeftovers } from '../../sql/journal.js'
import { createRecordWriter, type CallInsert } from '../../sql/records.js'
import { createHub, type Hub } from '../../sql/hub.js'
import { uuidv7 } from '../../sql/vocabulary/ids.js'
import { buildEnvelope } from '../../sql/vocabulary/event-envelope.js'
import { testDatabase, testDatabaseUrl } from '../support/db.js'
import { startTcpProxy } from '../support/tcp-proxy.js'
import { eventually } from '../support/service.js'
import { count, hashParty, liveSession, T0 } from './fixtures.js'
import { getSession } from '../../sql/sessions.js'

const skip = !testDatabaseUrl() && 'needs a real Postgres behind a TCP proxy (the embedded server has no URL to cut)'
const sleep = (ms: number) => new Promise(r => setTimeout(r, ms))

t.test('write-behind through a Postgres outage', { skip }, async t => {
  const db = await testDatabase(t)
  const url = new URL(testDatabaseUrl()!)
  url.pathname = `/${await db.pool.oneFirst(sql.unsafe`SELECT current_database()`) as string}`
  const pg = await startTcpProxy({ host: url.hostname, port: Number(url.port || 5432) })
  t.teardown(() => pg.close())
  url.host = `127.0.0.1:${pg.port}`
  const dataDir = mkdtempSync(join(tmpdir(), 'maskline-wb-'))
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
  const viaProxy = await openDatabase({ databaseUrl: url.toString(), dataDir })
  t.teardown(() => viaProxy.close())

  const { tenant, rec } = await liveSession(db.pool, 71)
  const call = (i: number): CallInsert => ({
    id: uuidv7(T0 + i), sessionId: rec.id, tenantId: tenant.id, providerCallId: `CA-wb-${rec.id}-${i}`, status: 'RINGING',
    direction: 'A_TO_B', initiatedAt: T0 + i, partyBHash: hashParty(tenant.salt, rec.customerPhone), proxy: rec.proxyNumber,
  })
  const events = (type: string) => count(db.pool, 'outbox', sql.fragment`session_id = ${rec.id} AND type = ${type}`)

  async function walk(pool: DatabasePool, journalDir: string, from: number, n: number, opts: { maxPending?: number; maxBatch?: number; hub?: Hub } = {}) {
    const journal = await openJournal({ dir: journalDir, dbId: 'test' })
    const errors: string[] = []
    const w = createRecordWriter(pool, { journal, retryMs: { first: 10, max: 100 }, onError: c => errors.push(c), ...opts })
    const answers: Array<Promise<unknown>> = []
    for (let i = from; i < from + n; i++) {
      const c = call(i)
      answers.push(w.upsertCall(c, [buildEnvelope(uuidv7(c.initiatedAt), 'call.incoming', c.initiatedAt, {
        sessionId: rec.id, tenantId: tenant.id, proxyNumber: rec.proxyNumber, callId: c.id, direction: c.direction, status: 'RINGING',
      })]))
      answers.push(w.callEvent({ key: { callId: c.id }, source: 'status', value: 'in-progress', at: T0 + i + 1000 }))
      answers.push(w.callEvent({ key: { callId: c.id }, source: 'dial-status', value: 'completed', duration: 61, at: T0 + i + 62_000 }))
    }
    return { w, answers, errors }
  }

  t.test('queued while Postgres is away, applied once when it is back', async t => {
    pg.down()
    const { w, answers, errors } = await walk(viaProxy.pool, join(dataDir, 'j1'), 0, 40)
    await sleep(500)
    t.equal(await count(db.pool, 'call_records', sql.fragment`session_id = ${rec.id}`), 0, 'nothing reached Postgres')
    t.equal(w.stats().pending, 120, 'every operation is held')
    t.ok(w.stats().retries > 0, 'and retried')
    t.ok(errors.length > 0, 'the failures are reported by code')
    pg.up()
    await w.flush()
    await Promise.all(answers)
    t.equal(await count(db.pool, 'call_records', sql.fragment`session_id = ${rec.id} AND status = 'COMPLETED' AND duration_seconds = 61`), 40)
    t.equal(await events('call.incoming'), 40)
    t.equal(await events('call.answered'), 40)
    t.equal(await events('call.ended'), 40)
    t.equal(await count(db.pool, 'billing_events', sql.fragment`session_id = ${rec.id} AND metric = 'call_minute'`), 40)
    t.equal((await getSession(db.pool, rec.tenantId, rec.id))?.callCount, 40, 'callCount counts them')
    t.equal(w.stats().pending, 0)
    await w.close()
  })

  t.test('past the memory bound, batches wait in the journal and are read back', async t => {
    pg.down()
    const { w, answers } = await walk(viaProxy.pool, join(dataDir, 'j2'), 100, 40, { maxPending: 20, maxBatch: 6 })
    await Promise.all(answers.slice(-3)) // spilled: answered with the failure value at once
    await sleep(200)
    t.ok(w.stats().spilled > 0, 'some batches live only in the journal')
    pg.up()
    await w.flush()
    t.equal(await count(db.pool, 'call_records', sql.fragment`session_id = ${rec.id} AND status = 'COMPLETED' AND provider_call_id LIKE ${`CA-wb-${rec.id}-1__`}`), 40)
    t.equal(await events('call.ended'), 80)
    t.same(w.stats(), { pending: 0, spilled: 0, retries: w.stats().retries, refused: 0 })
    await w.close()
  })

  t.test('a throw in a hub listener does not wedge the queue', async t => {
    let calls = 0
    const hub = createHub()
    hub.on('records', () => { calls++; throw new Error('subscriber bug') })
    const { w, answers } = await walk(db.pool, join(dataDir, 'j3'), 200, 3, { hub })
    await w.flush()
    await Promise.all(answers)
    t.ok(calls > 0)
    const later = call(299)
    t.equal(await w.upsertCall(later), later.id, 'the next batch still applies')
    await w.close()
  })

  t.test('a writer that dies with operations on disk leaves them to the next boot', async t => {
    pg.down()
    const dir = join(dataDir, 'j4')
    const { w } = await walk(viaProxy.pool, dir, 300, 10)
    await w.sync() // on disk: the answer may now be given
    // The process dies here: the writer is never closed, Postgres never saw the batch.
    const left = await readLeftovers(dir, 'test')
    t.equal(left.batches.flatMap(b => b.ops).length, 30, 'every operation is in the journal')
    t.same(await readLeftovers(dir, 'another-database'), { batches: [], files: [] }, 'never replayed into another database')
    const next = createRecordWriter(db.pool)
    await next.replay(left.batches)
    t.equal(await count(db.pool, 'call_records', sql.fragment`session_id = ${rec.id} AND status = 'COMPLETED' AND provider_call_id LIKE ${`CA-wb-${rec.id}-3__`}`), 10)
    await next.replay(left.batches)
    t.equal(await events('call.ended'), 93, 'a replay applied twice changes nothing twice')
    await next.close()
    pg.up()
    await eventually(async () => (w.stats().pending === 0 ? true : undefined), 'the first writer drains too')
    await w.close()
    t.equal(await events('call.ended'), 93, 'and changes nothing twice either')
  })
})
