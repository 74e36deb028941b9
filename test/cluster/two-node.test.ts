// Several nodes as one (docs/scaling.md): real service processes on different ports, one Postgres, one
// private redis-server (killed and restarted here, so never the shared TEST_REDIS_URL one).
// - A session created on node 1 routes on node 2 (each of 20 creates; how fast is the bench's
//   `two-node` scenario's figure, propagation p99, not a bar here); a swap on node 2 reaches a WebSocket
//   client on node 1; a session ended on one node expires exactly once (one session.expired row,
//   one message per WebSocket client on each node).
// - Redis SIGKILLed for 10 s while both nodes create, swap and end sessions; it comes back empty
//   (no persistence: the restart loses the stream). Within one sweep (30 s, the default period;
//   the test runs with 2 min, so only the reconciliation the reconnect starts can make it) every
//   node routes every session as Postgres holds it, checked
//   exhaustively through the voice callback (tests/cluster/lib.ts). Every expired session has
//   exactly one session.expired. Redis never held a phone number.
// - Node 2 SIGSTOPped while node 1 creates and ends sessions past the stream's trim length
//   (BUS_MAXLEN=100): resumed, it converges well within one sweep (the reader sees the
//   trim gap and reconciles at once).
// Embedded mode (PGlite, in-process bus) is single-node by design: skipped there with the reason.
import t from 'tap'
import { sql } from 'slonik'
import { busStream, childData, request, signupChild, type ChildService } from '../support/child-service.js'
import { connectWs } from '../support/ws-client.js'
import { CallbackDriver } from '../support/callback-driver.js'
import { phoneSource, voiceRoute } from '../durability/lib.js'
import { converge, create, endSession, enterpriseTenant, percentile, privateRedis, redisOutageUnderLoad, sleep, startNode, swapTo, type Sess } from './lib.js'

const embedded = process.env.MASKLINE_TEST_BACKEND === 'embedded' || !process.env.TEST_DATABASE_URL
const singleNode = embedded && 'embedded mode (PGlite, in-process bus) is single-node by design: no second node to reach'
/** The default sweep period: "within one sweep" below. */
const SWEEP_MS = 30_000
/**
 * The period the fault tests run with: 2 min, so that convergence within SWEEP_MS can only come
 * from the reconciliation a gap starts (a reconnect, a trimmed stream), not a periodic sweep that
 * happened to fall right.
 */
const SLOW_SWEEP = '120000'

t.test('node 1\'s creates route on node 2, a swap reaches the other node\'s WebSocket, an end expires once', { skip: singleNode }, async t => {
  const redis = await privateRedis(t)
  const data = await childData(t)
  const env = { RECONCILE_MS: String(SWEEP_MS) }
  const [n1, n2] = await Promise.all([startNode(t, data, redis.url, env), startNode(t, data, redis.url, env)]) as [ChildService, ChildService]
  const acc = await enterpriseTenant(data, [n1, n2], redis.client())
  const phone = phoneSource(1000)
  const driver2 = new CallbackDriver({ baseUrl: n2.url, mode: 'none' })

  // 1. Propagation: node 1's 201 → node 2 connects the call. The delays are shown, not judged.
  const delays: number[] = []
  for (let i = 0; i < 20; i++) {
    const s = await create(n1.url, acc.token, phone(), phone(), 15)
    if (typeof s === 'string') { t.fail(s); return }
    const t0 = performance.now()
    for (;;) {
      const r = await voiceRoute(driver2, s.agent, s.proxy)
      if (r.kind === 'connect') break
      if (performance.now() - t0 > 5_000) { t.fail(`session ${s.id} never routed on node 2: ${JSON.stringify(r)}`); return }
    }
    delays.push(performance.now() - t0)
  }
  const p50 = percentile(delays, 50), p99 = percentile(delays, 99)
  t.comment(`propagation node 1 → node 2 (201 answered → routable): p50 ${p50.toFixed(1)} ms, p99 ${p99.toFixed(1)} ms, max ${Math.max(...delays).toFixed(1)} ms over ${delays.length}`)
  t.equal(delays.length, 20, 'every session created on node 1 routes on node 2')

  // 2. A swap on node 2 reaches a WebSocket client on node 1, in order after its creation.
  const ws1 = await connectWs(`${n1.url}/v1/stream`, { headers: { authorization: `Bearer ${acc.token}` } })
  const ws2 = await connectWs(`${n2.url}/v1/stream`, { headers: { authorization: `Bearer ${acc.token}` } })
  t.teardown(() => { ws1.close(); ws2.close() })
  await sleep(200)
  const s = await create(n1.url, acc.token, phone(), phone(), 0)
  if (typeof s === 'string') { t.fail(s); return }
  for (let i = 0; i < 100 && (await voiceRoute(driver2, s.agent, s.proxy)).kind !== 'connect'; i++) await sleep(20)
  const newCustomer = phone()
  const sw = await request(n2.url, 'PATCH', `/v1/sessions/${s.id}/target`, { token: acc.token, body: { customerPhone: newCustomer } })
  t.equal(sw.status, 200, `swap on node 2: ${sw.text.slice(0, 200)}`)
  const typesOn = (ws: { messages: string[] }) => ws.messages.map(m => JSON.parse(m) as { type: string; data: { sessionId?: string } })
    .filter(e => e.data?.sessionId === s.id && e.type.startsWith('session.')).map(e => e.type) // the probes' call.incoming left out
  for (const deadline = Date.now() + 3_000; Date.now() < deadline && !typesOn(ws1).includes('session.target_swapped');) await sleep(20)
  t.same(typesOn(ws1), ['session.created', 'session.activated', 'session.target_swapped'], 'node 1\'s client got node 2\'s swap, after the creation')
  const driver1 = new CallbackDriver({ baseUrl: n1.url, mode: 'none' })
  t.match(await voiceRoute(driver1, s.agent, s.proxy), { kind: 'connect', to: newCustomer }, 'node 1 routes to the new customer')

  // 3. Ended (grace 0) on node 1: both nodes' expiry sweeps see it due; one of them expires it.
  const end = await request(n1.url, 'POST', `/v1/sessions/${s.id}/end`, { token: acc.token })
  t.equal(end.status, 200, 'ended on node 1')
  for (const deadline = Date.now() + 5_000; Date.now() < deadline && !(typesOn(ws1).includes('session.expired') && typesOn(ws2).includes('session.expired'));) await sleep(50)
  await sleep(1_500) // a second expiry, if any, would have been written and delivered by now
  const db = await data.open({ maximumPoolSize: 1 })
  t.teardown(() => db.close())
  t.equal(await db.pool.oneFirst(sql.unsafe`SELECT count(*)::int FROM outbox WHERE session_id = ${s.id} AND type = 'session.expired'`), 1, 'one session.expired written')
  t.equal(typesOn(ws1).filter(x => x === 'session.expired').length, 1, 'node 1\'s client got it once')
  t.equal(typesOn(ws2).filter(x => x === 'session.expired').length, 1, 'node 2\'s client got it once')
  t.match(await voiceRoute(driver2, s.agent, s.proxy), { kind: 'dead' }, 'node 2 no longer routes it')
})

t.test('Redis SIGKILLed for 10 s under load on both nodes, back empty: every node converges with Postgres', { skip: singleNode }, async t => {
  const redis = await privateRedis(t)
  const data = await childData(t)
  const env = { RECONCILE_MS: SLOW_SWEEP }
  const nodes = await Promise.all([startNode(t, data, redis.url, env), startNode(t, data, redis.url, env)])
  const looker = redis.client()
  const acc = await enterpriseTenant(data, nodes, looker)
  const stream = await busStream(data)
  const phone = phoneSource(1000)
  const sessions: Sess[] = []
  const failures: string[] = []
  let ops = 0

  // Each node: creates, swaps and ends (grace 0: it expires at once; grace 5: it stays live in
  // GRACE_PERIOD) on sessions made by either node, one request at a time per worker.
  async function worker(node: ChildService, seed: number, stopped: () => boolean) {
    let k = seed
    while (!stopped()) {
      k = (k * 1103515245 + 12345) % 2147483648
      const pick = k % 10
      const idle = sessions.filter(s => !s.busy && !s.ended)
      if (pick < 5 || idle.length < 4) {
        const s = await create(node.url, acc.token, phone(), phone(), 0)
        if (typeof s === 'string') failures.push(s)
        else sessions.push(s)
      } else {
        const s = idle[k % idle.length]!
        s.busy = true
        if (pick < 8) await swapTo(node.url, acc.token, s, phone(), failures)
        else await endSession(node.url, acc.token, s, failures)
        s.busy = false
      }
      ops++
      await sleep(30)
    }
  }
  const { opsDuring, outageMs, backAt } = await redisOutageUnderLoad(redis, stopped => Promise.all([worker(nodes[0]!, 1, stopped), worker(nodes[1]!, 2, stopped)]), () => ops)
  t.same(failures.slice(0, 10), [], 'every request of the load succeeded (Redis is not on the request path)')
  t.comment(`load: ${ops} requests, ${opsDuring} during the ${outageMs} ms outage; ${sessions.length} sessions`)

  const db = await data.open({ maximumPoolSize: 2 })
  t.teardown(() => db.close())
  // Measured from Redis's return; the load went on 2 s after it.
  const { ms, left } = await converge(nodes, db.pool, sessions, SWEEP_MS)
  const sinceBack = Date.now() - backAt
  t.comment(`converged ${sinceBack} ms after Redis returned (${ms} ms after the load stopped, exhaustive probes included)`)
  // Each node's own account: its first sweep after Redis returned, and what it reloaded.
  for (const [i, n] of nodes.entries()) {
    const swept = n.lines.filter(l => l.startsWith('{') && (l.includes('"reconciled"') || l.includes('bus gap'))).map(l => JSON.parse(l) as { msg?: string; time?: number; loaded?: number; changed?: number; ms?: number; reason?: string })
      .filter(o => (o.msg === 'reconciled' || o.msg?.startsWith('bus gap')) && (o.time ?? 0) >= backAt)
    const gap = swept.find(o => o.msg?.startsWith('bus gap'))
    const first = swept.find(o => o.msg === 'reconciled')
    t.comment(`node ${i + 1}: gap (${gap?.reason}) ${gap ? gap.time! - backAt : '-'} ms after Redis returned; first sweep reloaded ${first?.loaded} of ${first?.changed} changed sessions in ${first?.ms} ms, ${first ? first.time! - backAt : '-'} ms after Redis returned`)
  }
  t.same(left.slice(0, 20), [], `both nodes route all ${sessions.length} sessions as Postgres holds them`)
  t.ok(sinceBack <= SWEEP_MS, 'within one sweep of Redis returning')

  const twice = await db.pool.anyFirst(sql.unsafe`
    SELECT session_id::text FROM outbox WHERE type = 'session.expired' GROUP BY session_id HAVING count(*) > 1`)
  t.same(twice, [], 'no session expired twice')
  const expiredWithout = await db.pool.anyFirst(sql.unsafe`
    SELECT s.id::text FROM sessions s WHERE s.state = 'EXPIRED'
      AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.session_id = s.id AND o.type = 'session.expired')`)
  t.same(expiredWithout, [], 'every expired session has its session.expired')
  // Events name the proxy (the service's own number, as every webhook does); never a party's.
  const parties = new Set(sessions.flatMap(x => [x.agent, x.customer, ...x.previous]))
  const entries = await looker.xrange(stream, '-', '+')
  t.ok(entries.some(([, f]) => !/^\{"kind":"(alive|bye)"\}$/.test(f[3] ?? '')), 'the nodes published on the stream (not only heartbeats)')
  t.same(entries.flatMap(([, f]) => f).flatMap(v => v.match(/\+\d{8,15}/g) ?? []).filter(n => parties.has(n)), [],
    `no party's phone number among the ${entries.length} stream entries`)
})

t.test('node 2 paused past the stream\'s trim length converges within one sweep of resuming', { skip: singleNode }, async t => {
  const redis = await privateRedis(t)
  const data = await childData(t)
  const env = { RECONCILE_MS: SLOW_SWEEP, BUS_MAXLEN: '100' }
  const [n1, n2] = await Promise.all([startNode(t, data, redis.url, env), startNode(t, data, redis.url, env)]) as [ChildService, ChildService]
  const looker = redis.client()
  const acc = await enterpriseTenant(data, [n1, n2], looker)
  const stream = await busStream(data)
  const phone = phoneSource(1000)
  const sessions: Sess[] = []
  for (let i = 0; i < 30; i++) {
    const s = await create(n1.url, acc.token, phone(), phone(), 0)
    if (typeof s === 'string') { t.fail(s); return }
    sessions.push(s)
  }
  const db = await data.open({ maximumPoolSize: 2 })
  t.teardown(() => db.close())
  t.same((await converge([n2], db.pool, sessions, 10_000)).left, [], 'node 2 routes the first 30')

  const before = (await looker.xrevrange(stream, '+', '-', 'COUNT', 1))[0]![0]
  n2.kill('SIGSTOP')
  const stoppedAt = Date.now()
  t.teardown(() => n2.kill('SIGCONT'))
  // Ends of some of the first sessions, then creates: ~3 stream entries each, far past 100.
  for (const s of sessions.slice(0, 10)) {
    const r = await request(n1.url, 'POST', `/v1/sessions/${s.id}/end`, { token: acc.token })
    t.equal(r.status, 200, 'ended on node 1')
    s.ended = true
  }
  for (let i = 0; i < 150; i++) {
    const s = await create(n1.url, acc.token, phone(), phone(), 0)
    if (typeof s === 'string') { t.fail(s); return }
    sessions.push(s)
  }
  const oldest = (await looker.xrange(stream, '-', '+', 'COUNT', 1))[0]![0]
  const [om, os] = oldest.split('-').map(Number) as [number, number]
  const [bm, bs] = before.split('-').map(Number) as [number, number]
  t.ok(om > bm || (om === bm && os > bs), `the stream was trimmed past what node 2 had read (${before} < ${oldest}, ${await looker.xlen(stream)} entries left)`)
  await sleep(Math.max(1_500, 3_000 - (Date.now() - stoppedAt))) // node 1's expiry sweep writes the ends; a pause of 3 s at least
  n2.kill('SIGCONT')
  const resumedAt = Date.now()
  const { ms, left } = await converge([n2], db.pool, sessions, SWEEP_MS)
  t.comment(`node 2, paused ${resumedAt - stoppedAt} ms, converged ${Date.now() - resumedAt} ms after SIGCONT (${ms} ms of polling, ${sessions.length} sessions probed each time)`)
  t.same(left.slice(0, 20), [], `node 2 routes all ${sessions.length} sessions as Postgres holds them`)
  t.ok(Date.now() - resumedAt < 10_000, 'well within one sweep (30 s): the trim gap started one at once')
  t.ok(n2.lines.some(l => l.includes('bus gap') && l.includes('trimmed')), 'node 2 logged the trim gap')
})

t.test('node 1 SIGKILLed mid-load: node 2 routes every live session; node 1 restarted converges', { skip: singleNode }, async t => {
  const redis = await privateRedis(t)
  const data = await childData(t)
  const env = { RECONCILE_MS: SLOW_SWEEP }
  const started = await Promise.all([startNode(t, data, redis.url, env), startNode(t, data, redis.url, env)]) as [ChildService, ChildService]
  let n1 = started[0]
  const n2 = started[1]
  const acc = await enterpriseTenant(data, [n1, n2], redis.client())
  const phone = phoneSource(1000)
  const sessions: Sess[] = []
  let killed = false
  // Node 1 creates (and ends every fifth) until it is killed; node 2 keeps creating meanwhile.
  const onNode1 = (async () => {
    for (let i = 0; !killed; i++) {
      const s = await create(n1.url, acc.token, phone(), phone(), 0).catch(() => 'refused')
      if (typeof s !== 'string') {
        sessions.push(s)
        if (i % 5 === 4) await request(n1.url, 'POST', `/v1/sessions/${s.id}/end`, { token: acc.token }).then(r => { s.ended = r.status === 200 }, () => {})
      }
    }
  })()
  await sleep(3_000)
  killed = true
  n1.kill('SIGKILL')
  await n1.exited
  await onNode1
  for (let i = 0; i < 30; i++) {
    const s = await create(n2.url, acc.token, phone(), phone(), 0)
    if (typeof s === 'string') { t.fail(s); return }
    sessions.push(s)
  }
  // A create in flight at the kill may have committed without an answer: Postgres has it, the test
  // does not know its numbers, so it is not probed (the rest are, exhaustively).
  const db = await data.open({ maximumPoolSize: 2 })
  t.teardown(() => db.close())
  const two = await converge([n2], db.pool, sessions, 10_000)
  t.same(two.left.slice(0, 20), [], `node 2 routes all ${sessions.length} sessions as Postgres holds them, node 1 down`)
  // Nothing creates from here on, so Postgres's live count only falls: an end committed on node 1
  // just before the kill (grace 0) is expired by whichever node next finds it due, which can be
  // node 1's own boot, after it loaded the session. What node 1 loaded lies between the two counts.
  const liveCount = async () => Number(await db.pool.oneFirst(sql.unsafe`SELECT count(*) FROM sessions WHERE state IN ('PENDING','ACTIVE','GRACE_PERIOD')`))
  const liveBefore = await liveCount()
  n1 = await startNode(t, data, redis.url, env)
  const restarted = Date.now()
  const one = await converge([n1, n2], db.pool, sessions, SWEEP_MS)
  t.comment(`node 1 restarted (boot ${n1.boot.ms} ms, ${n1.boot.liveSessions} live sessions loaded), both converged ${Date.now() - restarted} ms after it listened`)
  t.same(one.left.slice(0, 20), [], 'after the restart both nodes route every session as Postgres holds it')
  const liveAfter = await liveCount()
  t.ok(n1.boot.liveSessions >= liveAfter && n1.boot.liveSessions <= liveBefore,
    `node 1 loaded every live session Postgres held at its boot: ${n1.boot.liveSessions}, between ${liveAfter} (after) and ${liveBefore} (before)`)
})

t.test('participant overlap and the proxy hold over two nodes: concurrent creates for the same parties', { skip: singleNode }, async t => {
  const redis = await privateRedis(t)
  const data = await childData(t)
  const [n1, n2] = await Promise.all([startNode(t, data, redis.url), startNode(t, data, redis.url)]) as [ChildService, ChildService]
  const acc = await enterpriseTenant(data, [n1, n2], redis.client())
  const phone = phoneSource(1000)
  // One agent in every session, customers in pairs: both nodes race to put the same two parties on
  // a proxy. The database refuses the second on the same proxy; the loser takes another.
  const agent = phone()
  // Pair after pair (the race is between the two nodes; twenty creates at once for one party on one
  // node would exhaust the runner's 8 allocation tries, a limit of its own, not of the cluster).
  const made: Array<Sess | string> = []
  for (let i = 0; i < 20; i++) {
    const customer = phone()
    made.push(...await Promise.all([create(n1.url, acc.token, agent, customer, 15), create(n2.url, acc.token, agent, customer, 15)]))
  }
  t.same(made.filter(x => typeof x === 'string'), [], 'every create succeeded (on another proxy when the first was taken)')
  const sessions = made.filter((x): x is Sess => typeof x !== 'string')
  const db = await data.open({ maximumPoolSize: 2 })
  t.teardown(() => db.close())
  const clashes = await db.pool.anyFirst(sql.unsafe`
    SELECT proxy_number || ' ' || party_hash FROM session_participants GROUP BY proxy_number, party_hash HAVING count(*) > 1`)
  t.same(clashes, [], 'no party twice on one proxy')
  const byProxy = new Map<string, number>()
  for (const s of sessions) byProxy.set(s.proxy, (byProxy.get(s.proxy) ?? 0) + 1)
  t.ok([...byProxy.values()].every(n => n === 1), `the shared agent is on ${byProxy.size} proxies, one session each`)
  const holders = await db.pool.any(sql.unsafe`SELECT number, tenant_id, live_sessions FROM proxy_numbers WHERE live_sessions > 0`) as readonly { tenant_id: string; live_sessions: number }[]
  t.ok(holders.every(h => h.tenant_id === acc.tenantId), 'every proxy in use is held by the tenant')
  t.equal(holders.reduce((a, h) => a + h.live_sessions, 0), sessions.length, 'proxy counters match the live sessions')
  t.equal(Number(await db.pool.oneFirst(sql.unsafe`SELECT live_sessions FROM tenants WHERE id = ${acc.tenantId}`)), sessions.length, 'the quota counter matches')
  const { left } = await converge([n1, n2], db.pool, sessions, 10_000)
  t.same(left.slice(0, 20), [], 'both nodes route the agent on each proxy to that proxy\'s customer')
})

t.test('the concurrent-session quota holds over two nodes racing for the last slots', { skip: singleNode }, async t => {
  const redis = await privateRedis(t)
  const data = await childData(t)
  const [n1, n2] = await Promise.all([startNode(t, data, redis.url), startNode(t, data, redis.url)]) as [ChildService, ChildService]
  // STARTER: 100 live sessions. Postgres is told 95 are live (as if made elsewhere, unknown to both
  // engines, which therefore let every create through to the database): the two nodes then race
  // 20 creates for the last 5 slots, and only Postgres can keep the count.
  const acc = await signupChild(n1.url)
  const db = await data.open({ maximumPoolSize: 2 })
  t.teardown(() => db.close())
  await db.pool.query(sql.unsafe`UPDATE tenants SET live_sessions = 95 WHERE id = ${acc.tenantId}`)
  const phone = phoneSource(1000)
  const answers = await Promise.all(Array.from({ length: 10 }, () => [n1, n2]).flat()
    .map(n => request(n.url, 'POST', '/v1/sessions', { token: acc.token, body: { agentPhone: phone(), customerPhone: phone() } })))
  const statuses = answers.map(a => a.status).sort()
  t.equal(statuses.filter(s => s === 201).length, 5, `exactly the 5 free slots were taken (${statuses.join(' ')})`)
  t.ok(answers.every(a => a.status === 201 || (a.status === 429 && /session limit/i.test(a.text))), 'the rest were refused with the tier limit')
  t.equal(Number(await db.pool.oneFirst(sql.unsafe`SELECT live_sessions FROM tenants WHERE id = ${acc.tenantId}`)), 100, 'the counter is at the limit, not past it')
  t.equal(Number(await db.pool.oneFirst(sql.unsafe`SELECT count(*) FROM sessions WHERE tenant_id = ${acc.tenantId}`)), 5, 'five sessions exist')
})
