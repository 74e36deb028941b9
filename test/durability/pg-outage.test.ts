// Postgres away for 10 s under load (contract D5: call records are written behind the
// provider's answer and "a crash loses none"). A child service on a private, throwaway Postgres
// cluster (test/support/pg-cluster.ts; the shared server is never stopped) takes a steady load
// of calls walked end to end as a TeXML provider does — the voice fetch, the child leg's status
// callbacks (in-progress, then completed with its CallDuration) and the Dial action (completed
// with DialCallDuration) — and of session creates, while Postgres is stopped (-m immediate) for
// 10 s and started again. Then:
// - every voice fetch was answered with a <Dial> and every callback with 200, also during the
//   outage (answered from memory; the change is queued until Postgres is back);
// - every create was answered 201, or 503 with Retry-After while Postgres was away (never 500,
//   never silence), and every 201 is in the database;
// - once Postgres is back (polled, up to 30 s) every call has exactly one record, COMPLETED with
//   the duration sent, exactly one call.incoming, call.answered and call.ended in the outbox,
//   exactly one call_minute usage row (`call_minute:<callId>`), and each session's callCount
//   equals its call records.
import t from 'tap'
import { sql } from 'slonik'
import { CallbackDriver } from '../support/callback-driver.js'
import { childData, signupChild, startChild, testDatabaseUrl, type ChildAccount } from '../support/child-service.js'
import { missing } from '../support/missing.js'
import { privateCluster, privateClusterMissing } from '../support/pg-cluster.js'
import { callFacts, callIdOf, callProblems, createSessions, dialAction, eventually, legStatus, parseRoute, phoneSource, type Sess, type WalkedCall } from './lib.js'

const TENANTS = 4
const SESSIONS_PER_TENANT = 4
const VOICE_WORKERS = 4
/** Pause of a voice worker between two calls. */
const CALL_PACE_MS = 100
/** Pause of a tenant's create worker between two creates: within STARTER's 100 requests a minute. */
const CREATE_PACE_MS = 600
const LOAD_BEFORE_MS = 2_000
const OUTAGE_MS = 10_000
const LOAD_AFTER_MS = 4_000
/** A callback or create not answered within this long counts as not answered. */
const ANSWER_TIMEOUT_MS = 5_000

const sleep = (ms: number) => new Promise(r => setTimeout(r, Math.max(0, ms)))

interface Answer { what: string; at: number; status: number | 'no answer'; detail?: string }
interface Create { tenant: ChildAccount; key: string; at: number; status: number | 'no answer'; retryAfter: string | null; id?: string; detail?: string }

const NAME = 'Postgres stopped 10 s under voice, status and create load: callbacks answered, creates 503, every call record complete once it is back'
const clusterMissing = privateClusterMissing()
if (!testDatabaseUrl()) {
  t.test(NAME, { skip: 'embedded mode: Postgres cannot be stopped under the service (PGlite runs inside the service process); runs with TEST_DATABASE_URL' }, () => {})
} else if (clusterMissing) {
  t.test(NAME, { skip: missing(`${clusterMissing} (the shared server is never stopped)`) }, () => {})
} else {
  t.test(NAME, async t => {
    const server = await privateCluster(t)
    if (!server) throw new Error('no private Postgres cluster, although privateClusterMissing() found nothing missing')
    t.comment(`stopping ${server.label}`)
    const data = await childData(t, { databaseUrl: server.url })
    const child = await startChild(t, data)
    const accounts = await Promise.all(Array.from({ length: TENANTS }, () => signupChild(child.url)))
    const phone = phoneSource(1000)
    const sessions: Sess[] = []
    for (const a of accounts) sessions.push(...await createSessions(child.url, a.token, SESSIONS_PER_TENANT, phone))

    const driver = new CallbackDriver({ baseUrl: child.url, mode: 'none' })
    const calls: Array<WalkedCall & { fetchedAt: number }> = []
    const answers: Answer[] = []
    const creates: Create[] = []
    let loading = true
    let callNo = 0

    async function answer(what: string, p: Promise<Response>, accept: (status: number, body: string) => boolean): Promise<string | null> {
      const at = Date.now()
      try {
        const r = await p
        const body = await r.text()
        answers.push({ what, at, status: r.status, ...(accept(r.status, body) ? {} : { detail: body.slice(0, 200) }) })
        return body
      } catch (err) {
        answers.push({ what, at, status: 'no answer', detail: String((err as Error).cause ?? err).slice(0, 200) })
        return null
      }
    }
    const timeout = () => AbortSignal.timeout(ANSWER_TIMEOUT_MS)

    async function voiceWorker() {
      while (loading) {
        const n = callNo++
        const s = sessions[n % sessions.length]!
        const caller = Math.floor(n / sessions.length) % 2 === 0 ? s.customer : s.agent
        const callSid = `v3:pg-outage-${process.pid}-${n}`
        const fetchedAt = Date.now()
        const xml = await answer('voice', driver.voice({ from: caller, to: s.proxy, callSid }, {}), (st, b) => st === 200 && callIdOf(b) !== null)
        const route = xml ? parseRoute(xml) : null
        const callId = xml ? callIdOf(xml) : null
        if (route?.kind === 'connect' && callId) {
          const d = 30 + (n % 150)
          calls.push({ callId, sessionId: s.id, durationSeconds: d, fetchedAt })
          const leg = { callId, legSid: `${callSid}-leg`, parentCallSid: callSid, proxy: s.proxy, called: route.to }
          await answer('status in-progress', legStatus(driver, { ...leg, callStatus: 'in-progress' }, timeout()), st => st === 200)
          await answer('status completed', legStatus(driver, { ...leg, callStatus: 'completed', callDuration: d }, timeout()), st => st === 200)
          await answer('dial-status completed', dialAction(driver, {
            callId, callSid, legSid: leg.legSid, caller, proxy: s.proxy, dialCallStatus: 'completed', dialCallDuration: d,
          }, timeout()), st => st === 200)
        }
        await sleep(CALL_PACE_MS)
      }
    }

    async function createWorker(a: ChildAccount) {
      while (loading) {
        const c: Create = { tenant: a, key: `pgo-${callNo}-${phone()}`, at: Date.now(), status: 'no answer', retryAfter: null }
        creates.push(c)
        try {
          // fetch itself: the answer's headers are needed (Retry-After).
          const r = await fetch(`${child.url}/v1/sessions`, {
            method: 'POST', signal: timeout(),
            headers: { authorization: `Bearer ${a.token}`, 'content-type': 'application/json', 'idempotency-key': c.key },
            body: JSON.stringify({ agentPhone: phone(), customerPhone: phone() }),
          })
          const text = await r.text()
          c.status = r.status
          c.retryAfter = r.headers.get('retry-after')
          if (r.status === 201) c.id = (JSON.parse(text) as { id: string }).id
          else c.detail = text.slice(0, 200)
        } catch (err) {
          c.detail = String((err as Error).cause ?? err).slice(0, 200)
        }
        await sleep(CREATE_PACE_MS)
      }
    }

    // The load, with Postgres stopped in the middle of it.
    const workers = [...Array.from({ length: VOICE_WORKERS }, () => voiceWorker()), ...accounts.map(a => createWorker(a))]
    await sleep(LOAD_BEFORE_MS)
    await server.stopImmediate()
    const downAt = Date.now()
    await sleep(OUTAGE_MS)
    const startingAt = Date.now()
    await server.start()
    const upAt = Date.now()
    await sleep(LOAD_AFTER_MS)
    loading = false
    await Promise.all(workers)
    /** Down: from the stop until `pg_ctl start -w` says it accepts connections again (crash recovery included). */
    const during = (at: number) => at >= downAt && at < upAt

    t.equal(await Promise.race([child.exited.then(() => 'exited'), sleep(10).then(() => 'running')]), 'running', 'the child survived the outage')
    const callsDuring = calls.filter(c => during(c.fetchedAt)).length
    t.comment(`load: ${calls.length} calls (${callsDuring} fetched while Postgres was down, ${downAt}..${upAt}), ${answers.length} callbacks, ${creates.length} creates; Postgres back after ${upAt - startingAt} ms of start`)
    t.ok(callsDuring > 0, 'calls were made while Postgres was down')

    // Answers.
    const summary = (xs: Answer[]) => {
      const m = new Map<string, number>()
      for (const a of xs) { const k = `${a.what} → ${a.status}${a.detail ? ` ${a.detail.replace(/[0-9a-f-]{36}/g, '…')}` : ''}`; m.set(k, (m.get(k) ?? 0) + 1) }
      return [...m].map(([k, n]) => `${n} × ${k}`)
    }
    const badVoice = answers.filter(a => a.what === 'voice' && (a.status !== 200 || a.detail))
    t.same(summary(badVoice), [], 'every voice fetch was answered 200 with a <Dial> (from memory, also while Postgres was down)')
    const badDuring = answers.filter(a => a.what !== 'voice' && during(a.at) && a.status !== 200)
    const cbDuring = answers.filter(a => a.what !== 'voice' && during(a.at)).length
    t.same(summary(badDuring), [], `status and dial-status callbacks sent while Postgres was down answered 200 (${cbDuring} sent)`)
    const badOther = answers.filter(a => a.what !== 'voice' && !during(a.at) && a.status !== 200)
    t.same(summary(badOther), [], 'status and dial-status callbacks sent while Postgres was up answered 200')

    // Creates.
    const createKinds = new Map<string, number>()
    for (const c of creates) {
      const k = `${during(c.at) ? 'down' : 'up'}: ${c.status}${c.status === 503 ? ` Retry-After ${c.retryAfter ?? 'missing'}` : ''}${c.status !== 201 && c.status !== 503 ? ` ${c.detail ?? ''}` : ''}`
      createKinds.set(k, (createKinds.get(k) ?? 0) + 1)
    }
    t.comment(`creates: ${[...createKinds].map(([k, n]) => `${n} × ${k}`).join('; ')}`)
    t.ok(creates.some(c => during(c.at)), 'creates were sent while Postgres was down')
    const badCreates = creates.filter(c => !(c.status === 201 || (c.status === 503 && c.retryAfter !== null && Number(c.retryAfter) > 0)))
    t.same(badCreates.map(c => `${during(c.at) ? 'while down' : 'while up'}: ${c.status} ${c.status === 503 ? 'without Retry-After' : c.detail ?? ''}`.trim()).slice(0, 8), [],
      `every create answered 201, or 503 with Retry-After (${badCreates.length} of ${creates.length} were not)`)
    t.ok(creates.some(c => c.status === 201 && c.at > upAt), 'creates succeed again once Postgres is back')

    // What Postgres holds once it is back.
    const db = await data.open()
    t.teardown(() => db.close())
    const acked = creates.filter(c => c.status === 201)
    const stored = await db.pool.anyFirst(sql.unsafe`SELECT id FROM sessions WHERE id = ANY(${sql.array(acked.map(c => c.id!), 'uuid')})`) as readonly string[]
    t.equal(stored.length, acked.length, `all ${acked.length} creates answered 201 are in the database`)
    const ids = calls.map(c => c.callId)
    const sessionIds = sessions.map(s => s.id)
    const settled = await eventually(async () => callProblems(await callFacts(db.pool, ids, sessionIds), calls, ['call.incoming', 'call.answered', 'call.ended']), p => p.length === 0)
    t.comment(`records ${settled.ok ? 'settled' : 'still incomplete'} ${settled.ms} ms after the load ended`)
    t.same(settled.value, [], `each of the ${calls.length} calls: one COMPLETED record with its duration, one call.incoming / call.answered / call.ended, one call_minute; callCount = records`)
  })
}
