// Expiry while the process is down (contract 3.1, contract D4): sessions whose deadline passes while
// no process runs are EXPIRED as soon as the service is back (the boot sweep runs before it
// listens), with exactly one session.expired outbox row and one webhook delivery each, even when
// two processes boot at once against the same Postgres (real PG only: an embedded DATA_DIR admits
// one process). The rebuilt engine also arms the timers of the sessions still live: those due
// shortly after the restart expire on time, and the others keep routing.
//
// Deadlines are real: maxDurationMinutes 1 (the smallest the API accepts) and an end with
// gracePeriodMinutes 1, so the test waits a little over a minute with the process down.
import t from 'tap'
import { CallbackDriver } from '../support/callback-driver.js'
import { childData, linesWithPhoneNumbers, request, signupChild, startChild, type ChildService } from '../support/child-service.js'
import { startWebhookReceiver } from '../support/webhook-receiver.js'
import { checkInvariants, eventCount, mapLimit, phoneSource, routeLabel, snapshot, voiceRoute, type Route } from './lib.js'

const DUE_WHILE_DOWN = 12 // created with maxDurationMinutes 1
const ENDED_DUE_WHILE_DOWN = 6 // ended with gracePeriodMinutes 1
const DUE_AFTER_RESTART = 6 // maxDurationMinutes 1, created later: due after the restarted process listens
const STAY_LIVE = 6

interface S { id: string; proxy: string; agent: string; customer: string; group: 'down' | 'ended-down' | 'after' | 'live'; expiresAt: number }

const sleep = (ms: number) => new Promise(r => setTimeout(r, Math.max(0, ms)))

t.test('sessions that expire while the process is down are expired at boot, once', async t => {
  const data = await childData(t)
  const twoNodes = data.kind === 'postgres'
  t.comment(`backend: ${data.kind}; ${twoNodes ? 'two processes boot at once' : 'one process (embedded DATA_DIR)'}`)
  const hooks = await startWebhookReceiver()
  t.teardown(() => hooks.close())

  const first = await startChild(t, data)
  const firstBootMs = first.listeningAt - first.spawnedAt
  const acct = await signupChild(first.url)
  const reg = await request(first.url, 'POST', '/v1/webhooks', { token: acct.token, body: { url: hooks.url, events: ['session.expired'] } })
  t.equal(reg.status, 201, 'webhook registered for session.expired')
  hooks.setSecret(reg.body.secret)

  const phone = phoneSource()
  const sessions: S[] = []
  async function create(group: S['group'], body: Record<string, unknown>): Promise<S> {
    const agent = phone(), customer = phone()
    const r = await request(first.url, 'POST', '/v1/sessions', { token: acct.token, body: { agentPhone: agent, customerPhone: customer, ...body } })
    if (r.status !== 201) throw new Error(`create → ${r.status} ${r.text}`)
    const s: S = { id: r.body.id, proxy: r.body.proxyNumber, agent, customer, group, expiresAt: Date.parse(r.body.expiresAt) }
    sessions.push(s)
    return s
  }

  for (let i = 0; i < DUE_WHILE_DOWN; i++) await create('down', { maxDurationMinutes: 1 })
  for (let i = 0; i < ENDED_DUE_WHILE_DOWN; i++) {
    const s = await create('ended-down', { gracePeriodMinutes: 1 })
    const e = await request(first.url, 'POST', `/v1/sessions/${s.id}/end`, { token: acct.token })
    t.equal(e.status, 200, 'ended with a grace period of 1 minute')
    s.expiresAt = Date.parse(e.body.expiresAt)
  }
  for (let i = 0; i < STAY_LIVE; i++) await create('live', {})
  const downDue = Math.max(...sessions.map(s => (s.group === 'live' ? 0 : s.expiresAt)))

  // The restart will come just after downDue; these must fall due after it listens again. Its
  // boot is estimated from the first one (spawn → listening), with a margin.
  // Two processes starting at once on a small machine take well over twice as long as one.
  const restartBootEstimate = Math.ceil(firstBootMs * (twoNodes ? 3 : 1.5)) + 5_000
  const afterDueAt = downDue + 500 + restartBootEstimate
  await sleep(afterDueAt - 60_000 - Date.now())
  for (let i = 0; i < DUE_AFTER_RESTART; i++) await create('after', { maxDurationMinutes: 1 })
  const afterDue = Math.max(...sessions.filter(s => s.group === 'after').map(s => s.expiresAt))
  t.comment(`first boot ${firstBootMs} ms; due while down by ${new Date(downDue).toISOString()}, after the restart from ${new Date(Math.min(...sessions.filter(s => s.group === 'after').map(s => s.expiresAt))).toISOString()}`)

  first.kill('SIGKILL')
  t.equal((await first.exited).signal, 'SIGKILL', 'the process is down (SIGKILL)')
  const nothingEarly = await request(first.url, 'GET', '/v1/health').then(() => false, () => true)
  t.ok(nothingEarly, 'nothing answers while it is down')

  // Wait, with no process running, until every "down" deadline has passed.
  await sleep(downDue + 500 - Date.now())
  const restartAt = Date.now()
  const starting = Array.from({ length: twoNodes ? 2 : 1 }, () => startChild(t, data))
  // Right after the restart: every session due while down is EXPIRED. Polled through the API of
  // the first process to listen, from the moment its listening line is read.
  const firstUp = await Promise.race(starting)
  const dueWhileDown = new Set(sessions.filter(s => s.group === 'down' || s.group === 'ended-down').map(s => s.id))
  let expiredSeen = -1
  let seenAfter = -1
  let polls = 0
  for (const deadline = Date.now() + 3_000; Date.now() < deadline;) {
    const r = await request(firstUp.url, 'GET', '/v1/sessions?state=EXPIRED&limit=100', { token: acct.token })
    polls++
    const ids = new Set((r.body.data as Array<{ id: string }>).map(v => v.id))
    expiredSeen = [...dueWhileDown].filter(id => ids.has(id)).length
    if (expiredSeen === dueWhileDown.size) { seenAfter = Date.now() - firstUp.listeningAt; break }
    await sleep(50)
  }
  const nodes: ChildService[] = await Promise.all(starting)
  const listenedAt = Math.min(...nodes.map(n => n.listeningAt))
  t.comment(`restart: ${nodes.map(n => `pid ${n.pid} listening after ${n.listeningAt - restartAt} ms (startService ${n.boot.ms} ms, ${n.boot.liveSessions} live sessions loaded)`).join('; ')}`)
  t.equal(expiredSeen, dueWhileDown.size, `all ${dueWhileDown.size} sessions due while down are EXPIRED after the restart ` +
    `(seen at the ${polls === 1 ? 'first' : `${polls}th`} poll, answered ${seenAfter} ms after the listening line)`)
  t.ok(Date.now() < afterDue, 'the restarted processes listen before the "after" sessions fall due (else the timer check below proves less)')

  // The engine was rebuilt: live sessions route, expired ones do not, on every node.
  const expect = (s: S, now: number): Route => (s.expiresAt > now ? { kind: 'connect', to: s.customer } : { kind: 'dead' })
  async function routes(label: string) {
    const now = Date.now()
    const problems: string[] = []
    for (const n of nodes) {
      const driver = new CallbackDriver({ baseUrl: n.url, mode: 'none' })
      // Skip sessions within 1 s of their deadline: either answer would be right.
      const checkable = sessions.filter(s => Math.abs(s.expiresAt - now) > 1_000)
      const got = await mapLimit(checkable, 6, s => voiceRoute(driver, s.agent, s.proxy))
      checkable.forEach((s, i) => {
        const want = expect(s, now)
        if (routeLabel(got[i]!) !== routeLabel(want)) problems.push(`node ${n.pid}, ${s.group} session ${s.id}: ${routeLabel(got[i]!)}, want ${routeLabel(want)}`)
      })
    }
    t.same(problems, [], `${label}: voice answers match (expired → DEAD_LINE, live → the customer)`)
  }
  await routes('after the restart')

  // The timers of the sessions loaded live were armed: the "after" group expires on time.
  await sleep(afterDue + 1_000 - Date.now())
  const after = await request(nodes[0]!.url, 'GET', '/v1/sessions?state=EXPIRED&limit=100', { token: acct.token })
  const expiredIds = new Set((after.body.data as Array<{ id: string }>).map(v => v.id))
  t.same(sessions.filter(s => s.group === 'after' && !expiredIds.has(s.id)).map(s => s.id), [], 'sessions due after the restart expired within 1 s of their deadline (timers armed at boot)')
  t.same(sessions.filter(s => s.group === 'live' && expiredIds.has(s.id)).map(s => s.id), [], 'sessions not due are still live')
  await routes('after the timers fired')

  // One webhook per session.expired, whatever the number of nodes.
  const expiring = sessions.filter(s => s.group !== 'live')
  await hooks.waitFor(expiring.length, 15_000).catch(() => {})
  await sleep(1_000) // a duplicate would arrive about now
  const bySession = new Map<string, number>()
  for (const d of hooks.accepted()) {
    if (d.json.type !== 'session.expired') continue
    const id = String(d.json.data['sessionId'])
    bySession.set(id, (bySession.get(id) ?? 0) + 1)
  }
  t.same(expiring.filter(s => bySession.get(s.id) !== 1).map(s => `${s.group} ${s.id}: ${bySession.get(s.id) ?? 0} deliveries`), [], 'exactly one session.expired webhook per expired session')
  t.equal(hooks.deliveries.filter(d => !d.verified).length, 0, 'every delivery is signed with the tenant secret')
  t.equal(new Set(hooks.accepted().map(d => d.id)).size, hooks.accepted().length, 'no webhook id delivered twice')

  for (const n of nodes) t.equal((await n.stop()).code, 0, `node ${n.pid} stops cleanly`)

  const db = await data.open()
  const snap = await snapshot(db.pool)
  await db.close()
  checkInvariants(t, snap, 'after the restart')
  const problems: string[] = []
  for (const s of sessions) {
    const row = snap.sessions.get(s.id)
    const want = s.group === 'live' ? 'ACTIVE' : 'EXPIRED'
    if (!row) { problems.push(`${s.id}: missing`); continue }
    if (row.state !== want) problems.push(`${s.group} ${s.id}: ${row.state}, want ${want}`)
    const n = eventCount(snap, s.id, 'session.expired')
    if (n !== (want === 'EXPIRED' ? 1 : 0)) problems.push(`${s.group} ${s.id}: ${n} session.expired rows`)
    if (want === 'EXPIRED' && row.expiredAt !== null && row.expiredAt < s.expiresAt) problems.push(`${s.group} ${s.id}: expired before its deadline`)
    // Expired by the restarted process, at the latest 1 s after it listened (the boot sweep runs
    // before it listens); the others within 1 s of their deadline (timers armed at boot).
    const by = s.group === 'down' || s.group === 'ended-down' ? listenedAt + 1_000 : s.expiresAt + 1_000
    if (want === 'EXPIRED' && (row.expiredAt === null || row.expiredAt > by || row.expiredAt < restartAt)) {
      problems.push(`${s.group} ${s.id}: expired at ${row.expiredAt === null ? null : new Date(row.expiredAt).toISOString()}, want between ${new Date(restartAt).toISOString()} and ${new Date(by).toISOString()}`)
    }
  }
  t.same(problems, [], 'in the database: EXPIRED exactly the due sessions, by the restarted process within 1 s of listening (or of the deadline), one session.expired row each')
  for (const c of [first, ...nodes]) t.same(linesWithPhoneNumbers(c.lines).slice(0, 3), [], `no log line of child ${c.pid} carries a phone number`)
})
