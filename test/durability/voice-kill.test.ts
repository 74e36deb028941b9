// Calls answered, then the process SIGKILLed before their records were written (contract D5: "a crash loses none that a later callback can rebuild"). A child service (real
// Postgres when TEST_DATABASE_URL is set, else the embedded PGlite in DATA_DIR) answers N voice
// fetches as fast as they come and is SIGKILLed the moment the last answer is read, with no wait:
// the records of the last calls are still in the write-behind queue (on real Postgres, all of
// them: a lock held by the test keeps them out of call_records until the kill). It restarts on
// the same data and the provider goes on as it would: for each call the child leg's status
// callbacks (in-progress, then completed with its CallDuration; /voice/status?callId=,
// From = proxy, To = the called party, ParentCallSid = the inbound CallSid) and the Dial action
// (/voice/dial-status?callId=, the inbound CallSid, From = caller, To = proxy, completed with
// DialCallDuration). Afterwards every call has exactly one record, COMPLETED with that duration,
// exactly one call.incoming, call.answered and call.ended, exactly one call_minute usage row, and
// every session's callCount counts its records: a record lost in the crash window is rebuilt,
// one that survived is not written twice.
// Twice: with DATA_DIR as the kill left it (the write-behind journal, DATA_DIR/journal, may hold
// the answered calls), and with that journal removed before the restart — the crash came before
// its write reached the disk, so the records exist nowhere and the callbacks alone must rebuild
// them (the session found by proxy and party). In that second run every fifth call gets only its
// Dial action (the leg's status callbacks never came): rebuilt from it, with call.incoming and
// call.ended and no call.answered. The journal-lost run is made once more with Twilio as the
// provider: TwiML answers, callbacks on /v1/webhooks/twilio signed as Twilio signs them.
import t, { type Test } from 'tap'
import { rmSync } from 'node:fs'
import { join } from 'node:path'
import { sql } from 'slonik'
import { CallbackDriver } from '../support/callback-driver.js'
import { childData, request, signupChild, startChild } from '../support/child-service.js'
import { FAKE_ACCOUNT_SID, FAKE_AUTH_TOKEN, FakeTwilio } from '../support/fake-twilio.js'
import { callFacts, callIdOf, callProblems, createSessions, dialAction, eventually, legStatus, mapLimit, parseRoute, phoneSource, type WalkedCall } from './lib.js'

const SESSIONS = 10
const CALLS = 50
/** Voice fetches in flight at once while the N calls are answered. */
const CONCURRENCY = 25
/** Callbacks in flight at once after the restart. */
const CALLBACK_CONCURRENCY = 8

interface Call extends WalkedCall { callSid: string; caller: string; called: string; proxy: string; dialOnly: boolean }

/** The sandbox (unsigned callbacks), or Twilio against a fake (signed callbacks, TwiML answers). */
async function provider(t: Test, name: 'sandbox' | 'twilio'): Promise<{ env: Record<string, string>; driver: (url: string) => CallbackDriver }> {
  if (name === 'sandbox') return { env: {}, driver: url => new CallbackDriver({ baseUrl: url, mode: 'none' }) }
  const fake = await FakeTwilio.start()
  t.teardown(() => fake.close())
  return {
    env: { CPAAS_PROVIDER: 'twilio', TWILIO_ACCOUNT_SID: FAKE_ACCOUNT_SID, TWILIO_AUTH_TOKEN: FAKE_AUTH_TOKEN, TWILIO_BASE_URL: fake.baseUrl },
    driver: url => new CallbackDriver({ baseUrl: url, mode: 'twilio', hmacSecret: FAKE_AUTH_TOKEN }),
  }
}

for (const [journal, via] of [['kept', 'sandbox'], ['lost', 'sandbox'], ['lost', 'twilio']] as const) t.test(`SIGKILL right after N answered voice fetches, journal ${journal}, ${via}: the callbacks after the restart leave N complete records, none twice`, async t => {
  const data = await childData(t)
  t.comment(`backend: ${data.kind}`)
  /** Calls that get only their Dial action after the restart (journal lost only). */
  const dialOnly = (i: number) => journal === 'lost' && i % 5 === 4
  const { env, driver: driverFor } = await provider(t, via)
  const first = await startChild(t, data, { env })
  const acct = await signupChild(first.url)
  const phone = phoneSource(3000)
  const sessions = await createSessions(first.url, acct.token, SESSIONS, phone)

  // Real Postgres: the test holds a SHARE lock on call_records while the calls are answered, so
  // the writer's INSERTs wait and no record of them can be in Postgres at the kill (the writer
  // would otherwise often commit them all within the milliseconds before it). Embedded: PGlite
  // runs inside the child, nothing can hold it from outside; the kill alone leaves part unwritten.
  let releaseLock = () => {}
  let lockHeld: Promise<unknown> = Promise.resolve()
  if (data.kind === 'postgres') {
    const lockDb = await data.open({ maximumPoolSize: 1 })
    t.teardown(() => lockDb.close())
    let locked!: () => void
    const isLocked = new Promise<void>(r => { locked = r })
    const released = new Promise<void>(r => { releaseLock = r })
    lockHeld = lockDb.pool.transaction(async tx => {
      await tx.query(sql.unsafe`LOCK TABLE call_records IN SHARE MODE`)
      locked()
      await released
      // The killed child's backends are still waiting on the lock (Postgres notices a dead client
      // only when it next talks to it): ended first, so no statement of the dead process commits.
      await tx.query(sql.unsafe`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`)
    })
    await isLocked
  }

  // N voice fetches, answered as fast as the service goes; SIGKILL as the last answer is read.
  const driver = driverFor(first.url)
  const calls: Call[] = []
  const unanswered: string[] = []
  let answered = 0
  let killedAt = 0
  await mapLimit(Array.from({ length: CALLS }, (_, i) => i), CONCURRENCY, async i => {
    const s = sessions[i % SESSIONS]!
    const caller = i % 2 === 0 ? s.customer : s.agent
    const callSid = `v3:voice-kill-${process.pid}-${i}`
    const r = await driver.voice({ from: caller, to: s.proxy, callSid })
    const xml = await r.text()
    if (++answered === CALLS) { first.kill('SIGKILL'); killedAt = Date.now() }
    const route = parseRoute(xml)
    const callId = callIdOf(xml)
    if (r.status !== 200 || route.kind !== 'connect' || !callId) { unanswered.push(`${i}: HTTP ${r.status} ${xml.slice(0, 200)}`); return }
    calls.push({ callId, sessionId: s.id, durationSeconds: 61 + i, callSid, caller, called: route.to, proxy: s.proxy, dialOnly: dialOnly(i) })
  })
  const exit = await first.exited
  t.equal(exit.signal, 'SIGKILL', 'the child died of SIGKILL')
  t.same(unanswered, [], `all ${CALLS} voice fetches answered with a Dial before the kill`)
  t.ok(killedAt > 0, 'killed as the last answer was read')
  releaseLock()
  await lockHeld

  // How many of those records the crash left in the database: the calls whose record is not there
  // are the ones the callbacks below must rebuild (0 here means the crash window was not hit).
  {
    const db = await data.open()
    try {
      const f = await callFacts(db.pool, calls.map(c => c.callId), sessions.map(s => s.id))
      t.comment(`at the kill: ${f.records.size} of ${calls.length} call records in the database, ${calls.length - f.records.size} only answered`)
      if (data.kind === 'postgres') t.equal(f.records.size, 0, 'the lock kept every record of these calls out of Postgres until the kill')
    } finally {
      await db.close()
    }
  }

  // Journal lost: the crash came before its write reached the disk (the only thing removed).
  if (journal === 'lost') rmSync(join(data.dataDir, 'journal'), { recursive: true, force: true })

  // Restart on the same data; the provider's callbacks for every call.
  const second = await startChild(t, data, { env })
  const driver2 = driverFor(second.url)
  const refused: string[] = []
  const check = async (what: string, c: Call, p: Promise<Response>) => {
    try {
      const r = await p
      const body = await r.text()
      if (r.status !== 200) refused.push(`${what} of ${c.callId}: HTTP ${r.status} ${body.slice(0, 200)}`)
    } catch (err) {
      refused.push(`${what} of ${c.callId}: no answer (${String((err as Error).cause ?? err)})`)
    }
  }
  await mapLimit(calls, CALLBACK_CONCURRENCY, async c => {
    const leg = { callId: c.callId, legSid: `${c.callSid}-leg`, parentCallSid: c.callSid, proxy: c.proxy, called: c.called }
    const signal = () => AbortSignal.timeout(5_000)
    if (!c.dialOnly) {
      await check('status in-progress', c, legStatus(driver2, { ...leg, callStatus: 'in-progress' }, signal()))
      await check('status completed', c, legStatus(driver2, { ...leg, callStatus: 'completed', callDuration: c.durationSeconds }, signal()))
    }
    await check('dial-status completed', c, dialAction(driver2, {
      callId: c.callId, callSid: c.callSid, legSid: leg.legSid, caller: c.caller, proxy: c.proxy, dialCallStatus: 'completed', dialCallDuration: c.durationSeconds,
    }, signal()))
  })
  t.same(refused, [], 'every callback after the restart answered 200')

  const want = (c: WalkedCall) => (c as Call).dialOnly ? ['call.incoming', 'call.ended'] : ['call.incoming', 'call.answered', 'call.ended']
  let problems: string[]
  if (data.kind === 'postgres') {
    const db = await data.open()
    t.teardown(() => db.close())
    const r = await eventually(async () => callProblems(await callFacts(db.pool, calls.map(c => c.callId), sessions.map(s => s.id)), calls, want), p => p.length === 0)
    problems = r.value
    t.comment(`records settled in ${r.ms} ms (ok: ${r.ok})`)
  } else {
    // PGlite is held by the child: wait through the API until every call reads COMPLETED, then
    // stop the child (gracefully) and read the database.
    const r = await eventually(async () => {
      const list = await request(second.url, 'GET', '/v1/calls?status=COMPLETED&limit=200', { token: acct.token })
      return list.status === 200 ? (list.body.data as unknown[]).length : -list.status
    }, n => n >= calls.length, { intervalMs: 500 })
    t.comment(`through the API: ${r.value} of ${calls.length} calls COMPLETED after ${r.ms} ms`)
    t.equal((await second.stop()).code, 0, 'the child stops cleanly')
    const db = await data.open()
    try {
      problems = callProblems(await callFacts(db.pool, calls.map(c => c.callId), sessions.map(s => s.id)), calls, want)
    } finally {
      await db.close()
    }
  }
  t.same(problems, [], `each of the ${calls.length} calls: one COMPLETED record with its duration, one call.incoming / call.answered (${calls.filter(c => c.dialOnly).length} Dial-action-only calls: none) / call.ended, one call_minute; callCount = records`)
})
