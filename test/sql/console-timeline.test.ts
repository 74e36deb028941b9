// README.md, Operator console: a session's timeline for the console (sql/console.ts sessionTimeline) is built from
// the session row, its call and SMS records and the audit rows of its swaps, never the outbox:
// what each source contributes, the tenant scoping, the swap window over the session's life (with
// its clock margin), the per-kind bound, and that no hash or number comes out.
import t from 'tap'
import { sql, type CommonQueryMethods } from 'slonik'
import { CLOCK_MARGIN_MS, sessionTimeline } from '../../sql/console.js'
import { createSession } from '../../sql/sessions.js'
import { uuidv7 } from '../../sql/vocabulary/ids.js'
import { testDatabase } from '../support/db.js'
import { addNumbers, addTenant, createArgs, MINUTE, party, proxy, record, T0 } from './fixtures.js'

const iso = (ms: number) => new Date(ms).toISOString()
const SWAP = 'session.target_swapped'

async function addCall(db: CommonQueryMethods, s: { id: string; tenantId: string }, at: number, status: string, direction: string, duration: number) {
  const id = uuidv7(at)
  await db.query(sql.unsafe`
    INSERT INTO call_records (id, session_id, tenant_id, provider_call_id, status, direction, duration_seconds, initiated_at, party_b_hash)
    VALUES (${id}, ${s.id}, ${s.tenantId}, ${`v3:${id}`}, ${status}, ${direction}, ${duration}, to_timestamp(${at / 1000}), ${'ab'.repeat(32)})`)
  return id
}

async function addSms(db: CommonQueryMethods, s: { id: string; tenantId: string }, at: number, status: string, reason: string | null) {
  const id = uuidv7(at)
  await db.query(sql.unsafe`
    INSERT INTO sms_records (id, session_id, tenant_id, provider_message_id, direction, status, sent_at, reason)
    VALUES (${id}, ${s.id}, ${s.tenantId}, ${`m-${id}`}, 'A_TO_B', ${status}, to_timestamp(${at / 1000}), ${reason})`)
  return id
}

async function addAudit(db: CommonQueryMethods, tenantId: string, target: string, at: number, action = SWAP) {
  await db.query(sql.unsafe`
    INSERT INTO audit_log (id, tenant_id, action, target_id, data, created_at)
    VALUES (${uuidv7(at)}, ${tenantId}, ${action}, ${target}, ${sql.jsonb({ previousPartyBHash: 'cd'.repeat(32), newPartyBHash: 'ef'.repeat(32) })}, to_timestamp(${at / 1000}))`)
}

t.test('the timeline from the session, its records and its swap audit rows', async t => {
  const db = await testDatabase(t)
  await addNumbers(db.pool, 4)
  const tenant = await addTenant(db.pool)
  const other = await addTenant(db.pool)
  const rec = record(tenant, { proxy: proxy(0), agent: party(1), customer: party(2) })
  t.equal(await createSession(db.pool, createArgs(tenant, rec)), 'ok')
  const s = { id: rec.id, tenantId: tenant.id }

  const call1 = await addCall(db.pool, s, T0 + 1 * MINUTE, 'MISSED', 'A_TO_B', 0)
  const call2 = await addCall(db.pool, s, T0 + 2 * MINUTE, 'COMPLETED', 'B_TO_A', 42)
  const sms1 = await addSms(db.pool, s, T0 + 90_000, 'DELIVERED', null)
  const sms2 = await addSms(db.pool, s, T0 + 4 * MINUTE, 'FAILED', 'opted_out')
  await addAudit(db.pool, tenant.id, rec.id, T0 + 3 * MINUTE) // its swap
  await addAudit(db.pool, tenant.id, rec.id, T0 - CLOCK_MARGIN_MS / 2) // a node clock ahead of Postgres's
  await addAudit(db.pool, tenant.id, uuidv7(T0), T0 + 3 * MINUTE) // another session's swap
  await addAudit(db.pool, tenant.id, rec.id, T0 + 3 * MINUTE, 'session.other') // another action
  await addAudit(db.pool, tenant.id, rec.id, T0 - CLOCK_MARGIN_MS - MINUTE) // before its life

  const live = await sessionTimeline(db.pool, tenant.id, rec.id, 200)
  t.same(live, {
    items: [
      { kind: 'created', at: iso(T0) },
      { kind: 'activated', at: iso(T0) },
      { kind: 'swap', at: iso(T0) }, // not before its creation
      { kind: 'call', at: iso(T0 + MINUTE), id: call1, direction: 'A_TO_B', status: 'MISSED', durationSeconds: 0 },
      { kind: 'sms', at: iso(T0 + 90_000), id: sms1, direction: 'A_TO_B', status: 'DELIVERED', reason: null },
      { kind: 'call', at: iso(T0 + 2 * MINUTE), id: call2, direction: 'B_TO_A', status: 'COMPLETED', durationSeconds: 42 },
      { kind: 'swap', at: iso(T0 + 3 * MINUTE) },
      { kind: 'sms', at: iso(T0 + 4 * MINUTE), id: sms2, direction: 'A_TO_B', status: 'FAILED', reason: 'opted_out' },
    ],
    truncated: false,
  }, 'oldest first; its own swaps within its life only')
  t.notMatch(JSON.stringify(live), /(ab){8}|(cd){8}|(ef){8}|\+\d{8}/, 'no hash, no number') // 16 hex of a hash: longer than any uuid group

  t.equal(await sessionTimeline(db.pool, other.id, rec.id, 200), null, 'another tenant: none')
  t.equal(await sessionTimeline(db.pool, tenant.id, uuidv7(T0), 200), null, 'an unknown session: none')
  t.equal(await sessionTimeline(db.pool, tenant.id, 'nope', 200), null)

  const bounded = await sessionTimeline(db.pool, tenant.id, rec.id, 1)
  t.equal(bounded!.truncated, true, 'more than one of a kind')
  t.same(bounded!.items.map(i => 'id' in i ? i.id : i.kind), ['created', 'activated', call2, 'swap', sms2], 'the newest of each kind')

  // Ended, then expired: those end the timeline, and a swap row after the expiry (and margin) is
  // outside its life.
  await db.pool.query(sql.unsafe`UPDATE sessions SET state = 'EXPIRED', ended_at = to_timestamp(${(T0 + 5 * MINUTE) / 1000}),
    expired_at = to_timestamp(${(T0 + 20 * MINUTE) / 1000}) WHERE id = ${rec.id}`)
  await addAudit(db.pool, tenant.id, rec.id, T0 + 20 * MINUTE + CLOCK_MARGIN_MS + MINUTE)
  const over = await sessionTimeline(db.pool, tenant.id, rec.id, 200)
  t.same(over!.items.slice(-3).map(i => [i.kind, i.at]), [['sms', iso(T0 + 4 * MINUTE)], ['ended', iso(T0 + 5 * MINUTE)], ['expired', iso(T0 + 20 * MINUTE)]])
  t.equal(over!.items.filter(i => i.kind === 'swap').length, 2)

  await db.pool.query(sql.unsafe`UPDATE sessions SET state = 'FAILED' WHERE id = ${rec.id}`)
  t.same((await sessionTimeline(db.pool, tenant.id, rec.id, 200))!.items.at(-1), { kind: 'failed', at: iso(T0 + 20 * MINUTE) })
})
