// Postgres restarted under load (real Postgres only): a child service takes a steady load of
// creates while Postgres is restarted four times: once cleanly (pg_ctl restart -m fast), then
// three crashes (stop -m immediate: backends die mid-query, as on a Postgres crash or OOM kill),
// the last one across the deadline of sessions that must expire meanwhile. The child survives
// (it answers /v1/health throughout, which may say postgres down for a moment), reconnects
// (creates succeed again after each restart), every create answered 201 is in the database
// afterwards, nothing answered otherwise is half-applied, retrying a failed create with its
// Idempotency-Key never duplicates it, and the expiries due during the outage are written once
// Postgres is back.
//
// Which server is restarted (test/support/pg-cluster.ts): by default a private, throwaway cluster (initdb into a temp
// directory, the same Postgres binaries as TEST_DATABASE_URL's server, run as the postgres user),
// so the restart cannot break the other test files tap runs in parallel against the shared
// server. MASKLINE_PG_RESTART=main restarts the server of TEST_DATABASE_URL itself instead
// (`pg_ctlcluster --skip-systemctl-redirect <ver> <cluster> restart`); teardown then makes sure it
// is up again, whatever happened. Run that mode on its own (`npx tap test/durability/pg-restart.test.ts`):
// in the whole suite this file runs beside other files that use the shared server.
import t from 'tap'
import { sql } from 'slonik'
import { childData, request, signupChild, startChild, testDatabaseUrl, type ChildAccount } from '../support/child-service.js'
import { mainCluster, privateCluster } from '../support/pg-cluster.js'
import { checkInvariants, eventCount, snapshot } from './lib.js'

const sleep = (ms: number) => new Promise(r => setTimeout(r, Math.max(0, ms)))

const TENANTS = 8
const WORKERS_PER_TENANT = 1
/**
 * Creates per tenant in each of the four load phases: with the retries at the end, a tenant stays
 * under STARTER's 100 requests a minute (contract 8.1) and 100 live sessions.
 */
const CREATES_PER_PHASE = 12
/**
 * Concurrent /v1/health loops in each phase (not rate-limited): they keep the service's pool busy,
 * so the crashes hit connections in the middle of a query.
 */
const HEALTH_LOAD = 12
/** Pause of each worker between two creates (three times that after a failure). */
const PACE_MS = 250
const EXPIRING = 8

if (!testDatabaseUrl()) {
  t.plan(0, 'skipped in embedded mode: there is no Postgres server to restart (PGlite runs inside the service process); runs with TEST_DATABASE_URL')
} else {
  t.test('Postgres restarted under load: the service survives, reconnects, loses no acknowledged write', async t => {
    const server = process.env.MASKLINE_PG_RESTART === 'main'
      ? await mainCluster(t, testDatabaseUrl()!)
      : (await privateCluster(t)) ?? await mainCluster(t, testDatabaseUrl()!)
    t.comment(`restarting ${server.label}`)
    const data = await childData(t, { databaseUrl: server.url })
    const child = await startChild(t, data)
    const accounts = await Promise.all(Array.from({ length: TENANTS }, () => signupChild(child.url)))

    // Sessions whose deadline will fall inside the last (crash) outage.
    const expiring: Array<{ id: string; expiresAt: number }> = []
    for (let i = 0; i < EXPIRING; i++) {
      const r = await request(child.url, 'POST', '/v1/sessions', {
        token: accounts[0]!.token, body: { agentPhone: `+1415555${7000 + 2 * i}`, customerPhone: `+1415555${7001 + 2 * i}`, maxDurationMinutes: 1 },
      })
      t.equal(r.status, 201, 'a session due in 1 minute')
      expiring.push({ id: r.body.id, expiresAt: Date.parse(r.body.expiresAt) })
    }
    const deadline = Math.max(...expiring.map(e => e.expiresAt))

    // Health, every 200 ms, the whole time: the process must always answer.
    const health: Array<{ at: number; status: number | 'no answer'; postgres?: string }> = []
    let probing = true
    const prober = (async () => {
      while (probing) {
        const at = Date.now()
        try {
          const r = await request(child.url, 'GET', '/v1/health', { signal: AbortSignal.timeout(3_000) })
          health.push({ at, status: r.status, postgres: r.body?.checks?.postgres })
        } catch {
          health.push({ at, status: 'no answer' })
        }
        await sleep(200)
      }
    })()

    // The load: creates with an Idempotency-Key each, paced to stay within the tier's limits.
    interface Attempt { tenant: ChildAccount; key: string; agent: string; customer: string; at: number; status?: number; id?: string; proxy?: string; error?: string }
    const attempts: Attempt[] = []
    let loading = false
    let phoneNo = 1000
    const budget = new Map<string, number>()
    async function worker(a: ChildAccount) {
      while (loading && budget.get(a.tenantId)! > 0) {
        budget.set(a.tenantId, budget.get(a.tenantId)! - 1)
        const at: Attempt = { tenant: a, key: `pgr-${phoneNo}`, agent: `+1415555${phoneNo++}`, customer: `+1415555${phoneNo++}`, at: Date.now() }
        attempts.push(at)
        try {
          const r = await request(child.url, 'POST', '/v1/sessions', {
            token: a.token, headers: { 'idempotency-key': at.key }, body: { agentPhone: at.agent, customerPhone: at.customer }, signal: AbortSignal.timeout(8_000),
          })
          at.status = r.status
          if (r.status === 201) { at.id = r.body.id; at.proxy = r.body.proxyNumber }
        } catch (err) {
          at.error = String((err as Error).cause ?? err)
        }
        await sleep(at.status === 201 ? PACE_MS : 3 * PACE_MS) // back off while Postgres is away
      }
    }
    /** Health checks as fast as they are answered: each one is a query on the service's pool. */
    async function healthLoad() {
      while (loading) {
        await request(child.url, 'GET', '/v1/health', { signal: AbortSignal.timeout(3_000) }).catch(() => {})
        await sleep(10)
      }
    }
    /** Load from 1 s before `during` until `afterMs` after it; returns when `during` ended. */
    async function underLoad(afterMs: number, during: () => Promise<void>): Promise<number> {
      loading = true
      for (const a of accounts) budget.set(a.tenantId, CREATES_PER_PHASE)
      const workers = [
        ...accounts.flatMap(a => Array.from({ length: WORKERS_PER_TENANT }, () => worker(a))),
        ...Array.from({ length: HEALTH_LOAD }, () => healthLoad()),
      ]
      await sleep(1_000)
      await during()
      const back = Date.now()
      await sleep(afterMs)
      loading = false
      await Promise.all(workers)
      return back
    }
    const succeededAfter = (ms: number) => attempts.filter(a => a.status === 201 && a.at > ms).length
    const recovered: Array<{ what: string; back: number }> = []

    // 1. A clean restart under load.
    recovered.push({ what: 'the clean restart (-m fast)', back: await underLoad(3_000, () => server.restartFast()) })
    // 2. Two crashes (-m immediate: backends die mid-query, as on a Postgres crash or OOM kill).
    for (const n of [1, 2]) {
      recovered.push({
        what: `crash ${n} (stop -m immediate, start after 1.5 s)`,
        back: await underLoad(3_000, async () => { await server.stopImmediate(); await sleep(1_500); await server.start() }),
      })
    }
    // 3. A crash across the deadline of the expiring sessions: down from 1 s before it to 2 s after.
    await sleep(deadline - 2_000 - Date.now())
    recovered.push({
      what: 'crash 3, across the expiry deadline',
      back: await underLoad(4_000, async () => {
        await server.stopImmediate()
        await sleep(deadline + 2_000 - Date.now())
        await server.start()
      }),
    })
    probing = false
    await prober

    t.equal(await Promise.race([child.exited.then(() => 'exited'), sleep(10).then(() => 'running')]), 'running', 'the child survived every restart')
    const timeline: string[] = []
    for (const h of health) {
      const label = `${h.status}${h.postgres ? ` ${h.postgres}` : ''}`
      const last = timeline.at(-1)
      if (last?.endsWith(`] ${label}`)) timeline[timeline.length - 1] = last.replace(/^(\d+)×/, (_, n) => `${Number(n) + 1}×`)
      else timeline.push(`1× [${new Date(h.at).toISOString().slice(11, 23)}] ${label}`)
    }
    t.comment(`health probes: ${timeline.join(', ')}`)
    const silent = health.filter(h => h.status === 'no answer')
    t.same(silent.map(h => new Date(h.at).toISOString().slice(11, 23)), [], `/v1/health answered every probe within 3 s (${health.length} probes, ${health.filter(h => h.status !== 200).length} said degraded)`)
    for (const r of recovered) t.ok(succeededAfter(r.back) > 0, `reconnected after ${r.what}: ${succeededAfter(r.back)} creates answered 201 after it`)
    const final = await request(child.url, 'GET', '/v1/health', { signal: AbortSignal.timeout(3_000) }).catch(err => ({ status: 0, body: String(err) }))
    const healthy = final.status === 200
    t.match(final, { status: 200, body: { checks: { postgres: 'ok' } } }, 'healthy at the end')

    const statuses = new Map<string, number>()
    for (const a of attempts) statuses.set(String(a.status ?? `error ${a.error}`), (statuses.get(String(a.status ?? `error ${a.error}`)) ?? 0) + 1)
    t.comment(`creates: ${[...statuses].map(([k, n]) => `${n} × ${k}`).join(', ')}`)
    t.same([...statuses.keys()].filter(k => !['201', '500', '503'].includes(k)), [], 'every create was answered: 201, or 500/503 while Postgres was away')

    // Expiries due during the outage are written once Postgres is back (the sweep runs every 250 ms).
    const db = await data.open()
    t.teardown(() => db.close())
    let states: readonly string[] = []
    for (const until = Date.now() + 5_000; Date.now() < until;) {
      states = await db.pool.anyFirst(sql.unsafe`SELECT state FROM sessions WHERE id = ANY(${sql.array(expiring.map(e => e.id), 'uuid')})`) as readonly string[]
      if (states.length === EXPIRING && states.every(x => x === 'EXPIRED')) break
      await sleep(250)
    }
    t.same([...states].sort(), Array(EXPIRING).fill('EXPIRED'), 'sessions whose deadline passed while Postgres was down are EXPIRED once it is back')

    if (healthy) {
      // Retry every create that got no 201, with its Idempotency-Key: a commit whose answer was
      // lost is replayed, never duplicated.
      for (const a of attempts.filter(x => x.status !== 201)) {
        const r = await request(child.url, 'POST', '/v1/sessions', {
          token: a.tenant.token, headers: { 'idempotency-key': a.key }, body: { agentPhone: a.agent, customerPhone: a.customer }, signal: AbortSignal.timeout(5_000),
        }).catch(err => ({ status: 0, text: String(err), body: null }))
        if (r.status === 201) { a.id = r.body.id; a.proxy = r.body.proxyNumber }
        else t.fail(`retry of ${a.key}: ${r.status} ${r.text.slice(0, 200)}`)
      }
      t.equal((await child.stop()).code, 0, 'the child stops cleanly')
    } else {
      t.comment('the service is not healthy: no retries, the child is killed')
      child.kill('SIGKILL')
      await child.exited
    }

    const snap = await snapshot(db.pool)
    checkInvariants(t, snap, 'after the restarts')
    const acked = attempts.filter(a => a.status === 201)
    t.same(acked.filter(a => snap.sessions.get(a.id!)?.proxy !== a.proxy).map(a => a.key), [], `all ${acked.length} creates answered 201 are in the database, on their proxy`)
    if (healthy) {
      t.same(attempts.filter(a => snap.idempotency.get(`${a.tenant.tenantId} ${a.key}`) !== a.id).map(a => a.key), [], 'each create (and its retry) is one session: the idempotency key names it')
      t.equal(snap.sessions.size, attempts.length + EXPIRING, 'no other session exists (no duplicate from a retry)')
    } else {
      t.ok(snap.sessions.size <= attempts.length + EXPIRING, 'no session beyond those requested')
    }
    t.same(expiring.filter(e => eventCount(snap, e.id, 'session.expired') !== 1).map(e => e.id), [], 'one session.expired per session expired across the outage')
  })
}
