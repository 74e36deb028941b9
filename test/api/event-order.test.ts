// contract D6: events of one session are delivered in order. A call's record and events are written
// behind the provider's answer (group commit), so a session command that follows the call (here a
// target swap) must not commit its event before the call's: the dispatcher delivers a session's
// pending events by id and could otherwise already have sent the later one. The session runner
// commits what the record writer holds before it commits a command (api/app/session-runner.ts,
// flushRecords). The test holds the call's write back with a lock on call_records.
import t from 'tap'
import { sql } from 'slonik'
import { testDatabaseUrl } from '../support/db.js'
import { startTestService } from '../support/service.js'
import { CallbackDriver } from '../support/callback-driver.js'

// The embedded server runs one transaction at a time over a single PGlite backend, so a held table
// lock stalls every connection there, reads included: the race needs a real Postgres to exist.
const skip = !testDatabaseUrl() && 'embedded mode runs one transaction at a time: no second writer to race the held call write'

t.test('a target swap right after a call commits after the call and its event', { skip }, async t => {
  const api = await startTestService(t)
  const pool = api.svc.db.pool
  const acct = await api.signup()
  const A = api.phone(1), B = api.phone(2), C = api.phone(3), D = api.phone(4)
  const s = (await api.req('POST', '/v1/sessions', { token: acct.token, body: { agentPhone: A, customerPhone: B } })).body
  const outbox = () => pool.anyFirst(sql.unsafe`SELECT type FROM outbox WHERE session_id = ${s.id} ORDER BY id`)

  let release!: () => void
  const released = new Promise<void>(r => { release = r })
  let locked!: () => void
  const isLocked = new Promise<void>(r => { locked = r })
  const holder = pool.connect(c => c.transaction(async tx => {
    await tx.query(sql.unsafe`LOCK TABLE call_records IN EXCLUSIVE MODE`)
    locked()
    await released
  }))
  await isLocked

  // A driver that does not wait for the record flush: that flush is what the lock holds back.
  const v = await new CallbackDriver({ baseUrl: api.url, mode: 'none' }).voice({ from: A, to: s.proxyNumber, callSid: 'order-1' })
  t.match(await v.text(), /<Dial/, 'the call is routed from memory while its record is held back')
  // No sleep to give a wrong order its chance: the swap's wait for the call's record is bounded
  // (contract D13), so while the call is held the swap answers 503 and must have committed nothing. A
  // swap that did not wait would answer 200 with its event committed ahead of the call's.
  const early = await api.req('PATCH', `/v1/sessions/${s.id}/target`, { token: acct.token, body: { customerPhone: C } })
  t.equal(early.status, 503, 'the swap waited for the held call record, up to its bound')
  t.same(await outbox(), ['session.created', 'session.activated'], 'the swap waits for the call: neither is committed yet')

  const swap = api.req('PATCH', `/v1/sessions/${s.id}/target`, { token: acct.token, body: { customerPhone: D } })
  release()
  await holder
  t.equal((await swap).status, 200, 'once the call is written the swap goes through')
  t.same(await outbox(), ['session.created', 'session.activated', 'call.incoming', 'session.target_swapped'])
})
