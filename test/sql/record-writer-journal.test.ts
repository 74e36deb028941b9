// The write-behind journal holds what Postgres has not taken (sql/record-writer.ts): a batch
// committed in time never touches the disk; one Postgres has not committed `journalAfterMs` after
// its cut is on disk without anyone asking (a crash then keeps it), `sync` puts everything pending
// on disk at once, and a writer closed with batches Postgres cannot take leaves them all to the
// next boot. Postgres is kept from committing by a lock the test holds on call_records (real
// Postgres only: the embedded server runs one session at a time).
// No check here depends on how fast a loaded machine commits or writes a file: a batch that must
// commit in time gets a second to do it, and what must reach the disk is waited for (up to
// WAIT_MS) long before any timer other than the one under test could have written it.
import t from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { sql } from 'slonik'
import { openJournal, readLeftovers, type Journal } from '../../sql/journal.js'
import { createRecordWriter, type CallInsert } from '../../sql/records.js'
import { uuidv7 } from '../../sql/vocabulary/ids.js'
import { testDatabase, testDatabaseUrl } from '../support/db.js'
import { count, hashParty, liveSession, T0 } from './fixtures.js'

const sleep = (ms: number) => new Promise(r => setTimeout(r, ms))
const JOURNAL_AFTER_MS = 40
/** How long a file write may take on a loaded CI machine before a check gives up on it. */
const WAIT_MS = 5_000

/** The journal's leftovers once `ok` holds for them, or the last ones read after WAIT_MS. */
async function leftoversWhen(dir: string, ok: (left: Awaited<ReturnType<typeof readLeftovers>>) => boolean) {
  const until = performance.now() + WAIT_MS
  for (;;) {
    const left = await readLeftovers(dir, 'test')
    if (ok(left) || performance.now() > until) return left
    await sleep(5)
  }
}

t.test('the journal holds what Postgres has not taken', async t => {
  const db = await testDatabase(t)
  const dataDir = mkdtempSync(join(tmpdir(), 'maskline-wbj-'))
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
  const { tenant, rec } = await liveSession(db.pool, 81)
  let n = 0
  const call = (): CallInsert => {
    const i = n++
    return {
      id: uuidv7(T0 + i), sessionId: rec.id, tenantId: tenant.id, providerCallId: `CA-wbj-${rec.id}-${i}`, status: 'RINGING',
      direction: 'A_TO_B', initiatedAt: T0 + i, partyBHash: hashParty(tenant.salt, rec.customerPhone), proxy: rec.proxyNumber,
    }
  }
  const stored = () => count(db.pool, 'call_records', sql.fragment`session_id = ${rec.id}`)

  async function writer(name: string, journalAfterMs = JOURNAL_AFTER_MS) {
    const dir = join(dataDir, name)
    const inner = await openJournal({ dir, dbId: 'test' })
    const appended: string[] = []
    const journal: Journal = Object.assign(Object.create(inner) as Journal, {
      append: (opsJson: string) => { appended.push(opsJson); return inner.append(opsJson) },
      done: inner.done.bind(inner), read: inner.read.bind(inner), close: inner.close.bind(inner),
    })
    const w = createRecordWriter(db.pool, { journal, journalAfterMs, retryMs: { first: 10, max: 50 } })
    return { w, dir, appended }
  }

  /** Holds call_records exclusively until the returned function is called: no batch can commit. */
  async function holdCallRecords(): Promise<() => Promise<void>> {
    let release!: () => void
    const released = new Promise<void>(r => { release = r })
    let locked!: () => void
    const isLocked = new Promise<void>(r => { locked = r })
    const tx = db.pool.transaction(async q => {
      await q.query(sql.unsafe`LOCK TABLE call_records IN ACCESS EXCLUSIVE MODE`)
      locked()
      await released
    })
    await isLocked
    return async () => { release(); await tx }
  }

  t.test('a batch committed in time never touches the disk', async t => {
    // A second to commit 30 rows: in time on any machine, and then past the moment it was due.
    const inTimeMs = 1_000
    const { w, dir, appended } = await writer('in-time', inTimeMs)
    const before = await stored()
    const ids = await Promise.all(Array.from({ length: 30 }, () => w.upsertCall(call())))
    t.equal(ids.filter(id => id !== null).length, 30, 'every call is stored')
    await sleep(inTimeMs + 200)
    t.equal(appended.length, 0, 'nothing was appended to the journal')
    t.equal(await stored(), before + 30)
    await w.close()
    t.same(await readLeftovers(dir, 'test'), { batches: [], files: [] }, 'and nothing is left for a boot')
  })

  const skip = !testDatabaseUrl() && 'holding a lock against the writer needs a second session (real Postgres)'

  t.test('a batch not committed in time is on disk without being asked', { skip }, async t => {
    const { w, dir, appended } = await writer('late')
    const release = await holdCallRecords()
    const calls = Array.from({ length: 5 }, call)
    const answers = calls.map(c => w.upsertCall(c))
    await sleep(JOURNAL_AFTER_MS / 4) // timers never fire early: not due yet
    t.equal(appended.length, 0, 'not yet: the commit may still come in time')
    // A crash once they are there keeps them: this is what the next boot would replay.
    const left = await leftoversWhen(dir, l => l.batches.length > 0)
    t.same(left.batches.flatMap(b => (b.ops as Array<{ row: CallInsert }>).map(o => o.row.providerCallId)), calls.map(c => c.providerCallId), 'the calls are in the journal')
    await release()
    t.same(await Promise.all(answers), calls.map(c => c.id), 'and committed once Postgres can take them')
    await w.close()
    t.same(await readLeftovers(dir, 'test'), { batches: [], files: [] }, 'then marked done: nothing is replayed')
  })

  t.test('sync puts everything pending on disk at once', { skip }, async t => {
    const { w, dir } = await writer('sync')
    const release = await holdCallRecords()
    const c = call()
    const answer = w.upsertCall(c)
    // The lock holds the commit back until release(): sync returning at all did not wait for it.
    const synced = await Promise.race([w.sync().then(() => true), sleep(WAIT_MS).then(() => false)])
    t.ok(synced, 'without waiting for the commit')
    t.equal((await readLeftovers(dir, 'test')).batches.length, 1, 'on disk, uncommitted')
    await release()
    t.equal(await answer, c.id)
    await w.close()
  })

  t.test('a writer being closed puts what Postgres has not taken on disk first', { skip }, async t => {
    // Due for the journal only after a minute: what reaches the disk before that, close() wrote.
    const { w, dir } = await writer('closed', 60_000)
    const release = await holdCallRecords()
    const calls = Array.from({ length: 3 }, call)
    const answers = calls.map(c => w.upsertCall(c))
    await sleep(20) // cut after flushMs (or by close() below), its statement waiting for the lock
    const closed = w.close(50)
    const left = await leftoversWhen(dir, l => l.batches.length > 0)
    t.same(left.batches.flatMap(b => (b.ops as Array<{ row: CallInsert }>).map(o => o.row.providerCallId)), calls.map(c => c.providerCallId), 'on disk for the next boot')
    await release() // the statement the lock held finishes; close() returns
    await closed
    t.same(await Promise.all(answers), calls.map(c => c.id))
  })
})
