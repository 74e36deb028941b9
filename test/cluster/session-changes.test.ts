// The change marker of migration 006 and the reconciliation sweep's read of it (docs/scaling.md), on
// both backends: every write path that moves a session's version is seen by the next read from
// the watermark, a call-count bump is not (it stays a HOT update), and a transaction that
// committed AFTER a sweep read, though it wrote its row before, is seen by the next sweep (the
// case a time or sequence watermark misses; real Postgres only: PGlite runs one transaction at a
// time). Then the reconciler over a real engine: a swap, an end and a create made behind its back
// are loaded by one sweep, and a stale reload never replaces a newer state.
import t from 'tap'
import { sql } from 'slonik'
import pino from 'pino'
import { createSession, expireSessions, updateSession } from '../../sql/sessions.js'
import { sessionChangesSince, sessionChangeWatermark } from '../../sql/session-changes.js'
import { getLiveSessionState } from '../../sql/session-load.js'
import { Engine } from '../../engine/index.js'
import type { SessionRecord, TenantRouting } from '../../engine/types.js'
import { createReconciler } from '../../api/app/reconcile.js'
import { testDatabase } from '../support/db.js'
import { eventually } from '../durability/lib.js'
import { addNumbers, addTenant, cipher, createArgs, envelope, hashParty, MINUTE, party, proxy, record, T0 } from '../sql/fixtures.js'

const ids = (r: { changes: Array<{ id: string }> }) => r.changes.map(c => c.id).sort()

t.test('the watermark sees every version change and nothing else', async t => {
  const db = await testDatabase(t)
  await addNumbers(db.pool, 20)
  const tenant = await addTenant(db.pool)
  const a = record(tenant, { proxy: proxy(1), agent: party(1), customer: party(2) })
  const b = record(tenant, { proxy: proxy(1), agent: party(3), customer: party(4) })

  // xids are cluster-wide: a transaction running elsewhere on the server (another database's)
  // holds the watermark back, so a window may read a change again (harmless: loads are by
  // version). What must hold is that no window misses one.
  const xidOf = async (id: string) => String(await db.pool.oneFirst(sql.unsafe`SELECT change_xid::text FROM sessions WHERE id = ${id}`))
  const w0 = await sessionChangeWatermark(db.pool)
  t.equal(await createSession(db.pool, createArgs(tenant, a)), 'ok')
  const r1 = await sessionChangesSince(db.pool, w0)
  t.same(ids(r1), [a.id], 'a create is a change')
  t.match(r1.changes[0], { id: a.id, version: 1, state: 'ACTIVE' })
  // Progress: once no older transaction is open anywhere on the server, the watermark passes the
  // create. Another test file's transaction may be open right now (CI runs three at once), so
  // read again until it has finished; a watermark that never advanced would fail here.
  const createdXid = BigInt(await xidOf(a.id))
  const next = await eventually(async () => BigInt((await sessionChangesSince(db.pool, w0)).next), n => n > createdXid, { intervalMs: 50 })
  t.ok(next.ok, 'the next watermark passes the committed create')
  t.same(ids(await sessionChangesSince(db.pool, String(next.value))), [], 'a read from past the create does not see it again')

  // The retention purge's count of purged calls (sql/retention.ts, migration 011) does not move
  // the marker: it changes no version.
  const created = await xidOf(a.id)
  await db.pool.query(sql.unsafe`UPDATE sessions SET purged_calls = purged_calls + 1, purged_last_call_at = now() WHERE id = ${a.id}`)
  t.equal(await xidOf(a.id), created, 'a purged-calls bump leaves the marker alone')

  const ended: SessionRecord = { ...a, state: 'GRACE_PERIOD', endedAt: T0 + MINUTE, expiresAt: T0 + 2 * MINUTE, version: 2 }
  t.equal(await updateSession(db.pool, { prev: a, next: ended, events: [] }), 'ok')
  t.ok(BigInt(await xidOf(a.id)) >= BigInt(r1.next), 'an update moves the marker to at least the last watermark')
  t.equal(await createSession(db.pool, createArgs(tenant, b)), 'ok')
  const r2 = await sessionChangesSince(db.pool, r1.next)
  t.same(ids(r2), [a.id, b.id].sort(), 'an update and a create since the last read')
  t.match(r2.changes.find(c => c.id === a.id), { version: 2, state: 'GRACE_PERIOD' })

  t.same(await expireSessions(db.pool, [{ ...ended, state: 'EXPIRED', expiredAt: T0 + 2 * MINUTE, version: 3 }], r => [envelope(r, 'session.expired')]), [a.id])
  const r3 = await sessionChangesSince(db.pool, r2.next)
  t.same(r3.changes.find(c => c.id === a.id), { id: a.id, version: 3, state: 'EXPIRED' }, 'an expiry is a change')
})

t.test('a transaction that commits after a sweep read is seen by the next sweep', async t => {
  const db = await testDatabase(t, { maximumPoolSize: 4 })
  if (db.kind === 'embedded') {
    t.comment('skipped on PGlite: one backend runs one transaction at a time, no commit can be late')
    return
  }
  await addNumbers(db.pool, 20)
  const tenant = await addTenant(db.pool)
  const other = await addTenant(db.pool) // not the same tenant row: the slow create holds its lock
  const late = record(tenant, { proxy: proxy(2), agent: party(11), customer: party(12) })
  const early = record(other, { proxy: proxy(3), agent: party(13), customer: party(14) })
  const w0 = await sessionChangeWatermark(db.pool)
  let release!: () => void
  const hold = new Promise<void>(r => { release = r })
  let written!: () => void
  const wrote = new Promise<void>(r => { written = r })
  // `late` is written first (the older transaction id) and committed last.
  let lateXid = ''
  const slow = db.pool.transaction(async tx => {
    lateXid = String(await tx.oneFirst(sql.unsafe`SELECT pg_current_xact_id()::text`))
    t.equal(await createSession(tx, createArgs(tenant, late)), 'ok')
    written()
    await hold
  })
  await wrote
  t.equal(await createSession(db.pool, createArgs(other, early)), 'ok')
  const r1 = await sessionChangesSince(db.pool, w0)
  t.same(ids(r1), [early.id], 'the sweep sees what has committed, not the uncommitted row')
  t.ok(BigInt(r1.next) <= BigInt(lateXid), 'the watermark stays at or below the transaction still running')
  release()
  await slow
  const r2 = await sessionChangesSince(db.pool, r1.next)
  t.ok(ids(r2).includes(late.id), 'the late commit is read by the next sweep, not lost under the watermark')
})

t.test('the reconciler loads what changed behind its back, and never an older state over a newer one', async t => {
  const db = await testDatabase(t)
  await addNumbers(db.pool, 20)
  const tenant = await addTenant(db.pool)
  const routing: TenantRouting = { id: tenant.id, tier: 'STARTER', expiredCallBehavior: 'DEAD_LINE', supportPhone: null, recordingConsentAudioUrl: null } as TenantRouting
  const engine = new Engine({ cooldownMs: 0 })
  engine.upsertTenant(routing)
  engine.addNumbers(Array.from({ length: 20 }, (_, i) => ({ number: proxy(i + 1), region: 'US', provider: 'sandbox' })))
  const since = await sessionChangeWatermark(db.pool)
  const log = pino({ level: 'silent' })
  const reconciler = createReconciler({ db: db.pool, engine, tenants: { peek: () => ({}) as never, refresh: async () => null }, cipher, log, sweepMs: 3_600_000 })
  reconciler.start(since)
  t.teardown(() => reconciler.close())

  const a = record(tenant, { proxy: proxy(4), agent: party(21), customer: party(22) })
  t.equal(await createSession(db.pool, createArgs(tenant, a)), 'ok')
  t.match(await reconciler.sweep(), { changed: 1, loaded: 1 })
  t.equal(engine.get(a.id)?.version, 1, 'a create made elsewhere is loaded')
  t.equal(engine.route(proxy(4), party(21), T0 + 1_000).kind, 'connect')

  // A swap elsewhere, then a stale reload of version 1 arriving late: memory keeps version 2.
  const v1 = await getLiveSessionState(db.pool, a.id, cipher)
  const swapped: SessionRecord = { ...a, customerPhone: party(23), version: 2 }
  t.equal(await updateSession(db.pool, {
    prev: a, next: swapped, events: [],
    swap: { oldCustomerHash: hashParty(tenant.salt, party(22)), newCustomerHash: hashParty(tenant.salt, party(23)), newCustomerEnc: cipher.encrypt(party(23)) },
  }), 'ok')
  t.match(await reconciler.sweep(), { changed: 1, loaded: 1 })
  engine.load(v1!.rec, v1!.extras)
  t.equal(engine.get(a.id)?.customerPhone, party(23), 'the stale version 1 did not replace version 2')
  t.equal(engine.route(proxy(4), party(22), T0 + 1_000).kind, 'no-session', 'the old customer no longer routes')

  // Expired elsewhere; a stale live reload after it does not bring it back.
  t.same(await expireSessions(db.pool, [{ ...swapped, state: 'EXPIRED', expiredAt: T0 + 2_000, version: 3 }], r => [envelope(r, 'session.expired')]), [a.id])
  reconciler.reload(a.id, 3)
  await reconciler.sweep()
  t.equal(engine.get(a.id), undefined, 'the expiry is loaded')
  engine.load(swapped)
  t.equal(engine.get(a.id), undefined, 'a stale live version after the expiry is refused (tombstone)')
  t.match(await reconciler.sweep(), { loaded: 0 }, 'nothing left to load')
})
