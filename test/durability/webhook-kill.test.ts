// Webhook delivery across a SIGKILL (contract D6: at least once, from the durable
// outbox). A child service posts every event of a scripted scenario (creates, target swaps, calls,
// ends) to a local receiver that verifies each Standard Webhooks signature. Mid-scenario the
// receiver hangs on some deliveries and answers others late, and the child is SIGKILLed while
// those are in flight (one of them answered 200 just before: a success it never records) and API
// requests are still coming in; it restarts on the same database / DATA_DIR and the scenario
// finishes. Then:
// - every event the database committed reached the receiver, signed, with its stored envelope,
//   and is recorded delivered with exactly one successful attempt in the delivery log; every
//   acknowledged operation has its event;
// - an event the dispatcher had recorded delivered before the kill arrived exactly once; a second
//   arrival only happens to one that was in flight (leased) at the kill, and is counted;
// - the deliveries cut short by the kill are redelivered by the restarted process once their
//   lease lapses, the crashed attempt counted (the retry schedule does not start over);
// - per session, first arrivals and first acceptances follow creation order (created, activated,
//   swaps, calls, expired last): a redelivery after the restart is not overtaken by later events
//   of its session (sql/webhooks.ts claimDue holds them back until it is done);
// - no delivery, header or log line carries a party's phone number.
import t from 'tap'
import { CallbackDriver } from '../support/callback-driver.js'
import { childData, linesWithPhoneNumbers, request, signupChild, startChild, type ChildService } from '../support/child-service.js'
import { startWebhookReceiver, type ReceivedDelivery } from '../support/webhook-receiver.js'
import { SUBSCRIBABLE_EVENTS } from '../../sql/vocabulary/event-envelope.js'
import { deliveryRows, outboxRows, phoneSource } from './lib.js'

const SESSIONS = 10
/** Kill phase: the first deliveries hang (the first is answered 200 at the kill), the next ones are answered 200 this late. */
const HANG = 3
const DELAYS_MS = [200, 500, 4_000, 4_500]
/** The kill phase goes on this long after those arrived, so the short delays are answered first... */
const KILL_NOT_BEFORE_MS = 700
/** ...and the kill comes while the hangs and long delays are open, before the 5 s attempt timeout. */
const KILL_BY_MS = 3_500
/** A delivery cut short is redelivered once its lease lapses (30 s, DispatcherOptions.leaseMs). */
const REDELIVERY_WAIT_MS = 45_000

const sleep = (ms: number) => new Promise(r => setTimeout(r, Math.max(0, ms)))
const key = (sessionId: unknown, type: string) => `${String(sessionId)} ${type}`

interface Sess { id: string; proxy: string; agent: string; ended: boolean }

t.test('SIGKILL with webhook deliveries in flight: every committed event is delivered after the restart, in order per session', async t => {
  const started = Date.now()
  const data = await childData(t)
  t.comment(`backend: ${data.kind}`)
  const hooks = await startWebhookReceiver()
  t.teardown(() => hooks.close())
  const children: ChildService[] = []
  let child = await startChild(t, data)
  children.push(child)
  const acct = await signupChild(child.url)
  const reg = await request(child.url, 'POST', '/v1/webhooks', { token: acct.token, body: { url: hooks.url, events: [...SUBSCRIBABLE_EVENTS] } })
  t.equal(reg.status, 201, 'webhook registered for every subscribable event')
  hooks.setSecret(reg.body.secret)

  const phone = phoneSource()
  /** Every number a party had: none may reach the receiver. */
  const parties: string[] = []
  const sessions: Sess[] = []
  /** `${sessionId} ${type}` → events known committed: acknowledged operations, then the database. */
  const want = new Map<string, number>()
  const expect = (sessionId: string, type: string) => want.set(key(sessionId, type), (want.get(key(sessionId, type)) ?? 0) + 1)
  /** Event ids read from the database after the kill: each must be delivered. */
  const wantIds = new Set<string>()

  const api = (method: string, path: string, body?: unknown) =>
    request(child.url, method, path, { token: acct.token, ...(body !== undefined ? { body } : {}) }).catch(() => undefined)
  async function create(): Promise<void> {
    const agent = phone(), customer = phone()
    parties.push(agent, customer)
    const r = await api('POST', '/v1/sessions', { agentPhone: agent, customerPhone: customer, gracePeriodMinutes: 0 })
    if (r?.status !== 201) throw new Error(`create → ${r?.status} ${r?.text}`)
    sessions.push({ id: r.body.id, proxy: r.body.proxyNumber, agent, ended: false })
    expect(r.body.id, 'session.created')
    expect(r.body.id, 'session.activated')
  }
  /** The status, or undefined when no answer came (the kill). */
  async function swap(s: Sess): Promise<number | undefined> {
    const customer = phone()
    parties.push(customer)
    const r = await api('PATCH', `/v1/sessions/${s.id}/target`, { customerPhone: customer })
    if (r?.status === 200) expect(s.id, 'session.target_swapped')
    return r?.status
  }
  async function end(s: Sess): Promise<number | undefined> {
    const r = await api('POST', `/v1/sessions/${s.id}/end`)
    // Grace 0: session.expired at the next expiry sweep.
    if (r?.status === 200) { s.ended = true; expect(s.id, 'session.expired') }
    return r?.status
  }
  let calls = 0
  /** A completed call from the agent: call.incoming, call.answered, call.ended. */
  async function call(driver: CallbackDriver, s: Sess): Promise<string> {
    const sid = `wh-kill-${process.pid}-${++calls}`
    const v = await driver.voice({ from: s.agent, to: s.proxy, callSid: sid })
    const callId = /callId=([0-9a-f-]{36})/.exec(await v.text())?.[1]
    if (v.status !== 200 || !callId) throw new Error(`voice → ${v.status}, no callId`)
    const answered = await driver.status({ callId, callSid: `${sid}-leg`, callStatus: 'in-progress' })
    const ended = await driver.dialStatus({ callId, callSid: sid, dialCallStatus: 'completed', dialCallDuration: 42 })
    if (answered.status !== 200 || ended.status !== 200) throw new Error(`call callbacks → ${answered.status}, ${ended.status}`)
    for (const type of ['call.incoming', 'call.answered', 'call.ended']) expect(s.id, type)
    return callId
  }
  const all = <T>(xs: readonly T[], fn: (x: T) => Promise<number | undefined>) => Promise.all(xs.map(fn))
  const oks = (xs: readonly unknown[]) => xs.map(() => 200)

  /** What the receiver has not accepted (2xx, signed) yet, of `want` and `wantIds`. */
  function missing(): string[] {
    const accepted = hooks.accepted().filter(d => d.verified)
    const got = new Map<string, Set<string>>()
    for (const d of accepted) {
      const k = key(d.json.data['sessionId'], d.json.type)
      got.set(k, (got.get(k) ?? new Set()).add(d.id))
    }
    const ids = new Set(accepted.map(d => d.id))
    return [
      ...[...want].filter(([k, n]) => (got.get(k)?.size ?? 0) < n).map(([k, n]) => `${k}: ${got.get(k)?.size ?? 0} of ${n}`),
      ...[...wantIds].filter(id => !ids.has(id)).map(id => `event ${id}`),
    ]
  }
  /** Polls `probe` until it returns nothing (or the time is up); what it returned last. */
  async function until(probe: () => string[], timeoutMs: number): Promise<string[]> {
    for (const deadline = Date.now() + timeoutMs; ;) {
      const m = probe()
      if (m.length === 0 || Date.now() > deadline) return m.slice(0, 10)
      await sleep(100)
    }
  }

  // ---- phase 1: creates, swaps and calls, all delivered -------------------------------------------
  const driver = new CallbackDriver({ baseUrl: child.url, mode: 'none' })
  for (let i = 0; i < SESSIONS; i++) await create()
  t.same(await all(sessions.slice(0, 5), swap), oks(sessions.slice(0, 5)), 'phase 1: swaps')
  for (const s of sessions.slice(5, 8)) await call(driver, s)
  t.same(await until(missing, 15_000), [], 'phase 1: every event delivered')
  const before = hooks.deliveries.length

  // ---- phase 2: deliveries hang or are answered late; the child is killed ---------------------------
  hooks.script('hang', HANG)
  for (const delayMs of DELAYS_MS) hooks.script({ status: 200, delayMs })
  // Wave 1: a swap per session (but the last 2, kept out of the kill), delivered concurrently:
  // the first arrivals hang or wait.
  const wave1 = sessions.slice(0, SESSIONS - 2)
  t.same(await all(wave1, swap), oks(wave1), 'wave 1: a swap per session')
  await hooks.waitFor(before + HANG + DELAYS_MS.length, 10_000)
  const hung = hooks.deliveries.slice(before, before + HANG)
  // Wave 2: events that queue behind one in flight (same session) or go straight out.
  const wave2 = await Promise.all([...sessions.slice(0, 2).map(end), ...sessions.slice(2, 6).map(swap)])
  t.same(wave2, oks(wave2), 'wave 2: 2 ends, 4 swaps')
  await sleep(hung[0]!.receivedAt + KILL_NOT_BEFORE_MS - Date.now())
  // Wave 3: swaps in flight when the child dies (the first answer triggers the kill).
  const first = child
  let killedAt = 0
  let acceptedAtKill = new Set<string>()
  let openAtKill: ReceivedDelivery[] = []
  const kill = () => {
    if (killedAt) return
    // A 200 the dispatcher reads only in its death: delivered, never recorded (at least once).
    hooks.answer(hung[0]!)
    first.kill('SIGKILL')
    killedAt = Date.now()
    acceptedAtKill = new Set(hooks.accepted().map(d => d.id))
    openAtKill = hooks.pending()
  }
  const wave3 = await Promise.all(sessions.slice(2, 8).map(s => swap(s).finally(kill)))
  t.equal((await first.exited).signal, 'SIGKILL', 'the child died of SIGKILL')
  const arrivalsBeforeRestart = hooks.deliveries.length
  t.ok(killedAt - hung[0]!.receivedAt < KILL_BY_MS, `killed ${killedAt - hung[0]!.receivedAt} ms after the first hung delivery arrived (within ${KILL_BY_MS} ms)`)
  t.comment(`kill: ${openAtKill.length} deliveries open at the receiver, ${acceptedAtKill.size} events accepted before; wave 3 answers: ${wave3.map(x => x ?? 'none').join(' ')}`)

  // ---- the database after the kill -----------------------------------------------------------------
  let db = await data.open()
  const atKill = await outboxRows(db.pool)
  await db.close()
  const byId = new Map(atKill.map(r => [r.id, r]))
  const doneAtKill = new Set(atKill.filter(r => r.outcome === 'delivered').map(r => r.id))
  const leasedAtKill = new Set(atKill.filter(r => r.leased).map(r => r.id))
  const waitingAtKill = atKill.filter(r => r.outcome === null && !r.leased)
  t.same(atKill.filter(r => r.outcome !== null && r.outcome !== 'delivered').map(r => `${r.type} ${r.id}: ${r.outcome}`), [], 'after the kill: no event skipped or given up')
  t.ok(openAtKill.length >= HANG + 1 && hung.slice(1).every(d => openAtKill.includes(d)), `the hung deliveries and the long-delayed ones were open at the kill (${openAtKill.length})`)
  t.ok(acceptedAtKill.has(hung[0]!.id) && leasedAtKill.has(hung[0]!.id), 'after the kill: the 200 answered at the kill is not recorded, the event still leased')
  t.same(openAtKill.filter(d => !leasedAtKill.has(d.id)).map(d => `${d.json.type} ${d.id}`), [], 'after the kill: the deliveries open at the receiver are leased (in flight), not done')
  t.same([...acceptedAtKill].filter(id => !doneAtKill.has(id) && !leasedAtKill.has(id)), [],
    'after the kill: each event accepted before it is recorded delivered, or still leased (the 200 not yet recorded)')
  t.ok(waitingAtKill.length > 0, `after the kill: ${waitingAtKill.length} events wait (behind an event of their session in flight, or not yet claimed)`)
  const committed = new Map<string, number>()
  for (const r of atKill) committed.set(key(r.sessionId, r.type), (committed.get(key(r.sessionId, r.type)) ?? 0) + 1)
  // An acknowledged end expires at the next sweep, which the kill may have come before.
  const lost = [...want].filter(([k, n]) => !k.endsWith(' session.expired') && (committed.get(k) ?? 0) < n)
  t.same(lost.map(([k, n]) => `${k}: ${committed.get(k) ?? 0} of ${n} acknowledged`), [], 'after the kill: every acknowledged operation has its event in the outbox')
  // From here on the database is the reference: a wave 3 swap without an answer may have committed.
  for (const r of atKill) wantIds.add(r.id)
  for (const [k, n] of committed) want.set(k, Math.max(want.get(k) ?? 0, n))

  // ---- restart on the same data and finish the scenario ---------------------------------------------
  const restartedAt = Date.now()
  child = await startChild(t, data)
  children.push(child)
  t.comment(`restart: listening after ${child.listeningAt - restartedAt} ms`)
  // At once, while the deliveries cut short are still leased: the events of their sessions
  // (swaps, then expiry) must wait behind them.
  const live = sessions.filter(s => !s.ended)
  t.same(await all(live, swap), oks(live), 'after the restart: a swap per live session')
  // Calls on sessions with nothing in flight, delivered before their end: a call's events are
  // written behind its callbacks, so an end right after the last one could expire the session first.
  const blocked = new Set(atKill.filter(r => r.outcome === null).map(r => r.sessionId))
  const driver2 = new CallbackDriver({ baseUrl: child.url, mode: 'none' })
  const callIds: string[] = []
  for (const s of live.filter(s => !blocked.has(s.id)).slice(0, 3)) callIds.push(await call(driver2, s))
  const callEnded = (id: string) => hooks.accepted().some(d => d.json.type === 'call.ended' && d.json.data['callId'] === id)
  t.ok(callIds.length >= 2, `after the restart: ${callIds.length} calls`)
  t.same(await until(() => callIds.filter(id => !callEnded(id)), 10_000), [], 'after the restart: the calls delivered')
  t.same(await all(live, end), oks(live), 'the remaining sessions ended')
  t.same(await until(missing, REDELIVERY_WAIT_MS), [], `after the restart: every committed event delivered (${((Date.now() - restartedAt) / 1000).toFixed(1)} s after the restart)`)
  await sleep(500) // a duplicate or a stray event would arrive about now
  t.equal((await child.stop()).code, 0, 'the restarted child stops cleanly')

  // ---- the final state --------------------------------------------------------------------------------
  db = await data.open()
  const rows = await outboxRows(db.pool)
  const log = await deliveryRows(db.pool)
  await db.close()
  const rowIds = new Set(rows.map(r => r.id))
  const arrivals = new Map<string, ReceivedDelivery[]>()
  for (const d of hooks.deliveries) arrivals.set(d.id, [...(arrivals.get(d.id) ?? []), d])
  const successes = new Map<string, number[]>()
  for (const l of log) if (l.success) successes.set(l.eventId, [...(successes.get(l.eventId) ?? []), l.attemptCount])

  const counts = new Map<string, number>()
  for (const r of rows) counts.set(key(r.sessionId, r.type), (counts.get(key(r.sessionId, r.type)) ?? 0) + 1)
  t.same([...new Set([...want.keys(), ...counts.keys()])].filter(k => want.get(k) !== counts.get(k)).map(k => `${k}: ${counts.get(k) ?? 0}, want ${want.get(k) ?? 0}`), [],
    `the outbox holds exactly the events of the committed operations (${rows.length})`)
  t.same(atKill.filter(r => !rowIds.has(r.id)).map(r => r.id), [], 'no outbox row committed before the kill disappeared')

  const deliveryProblems: string[] = []
  for (const r of rows) {
    const got = arrivals.get(r.id) ?? []
    if (r.outcome !== 'delivered') deliveryProblems.push(`${r.type} ${r.id}: outcome ${r.outcome}`)
    if (!got.some(d => d.answered === 200 && d.verified)) deliveryProblems.push(`${r.type} ${r.id}: never accepted (${got.length} arrivals)`)
    if (got.some(d => JSON.stringify(d.json) !== JSON.stringify(r.envelope))) deliveryProblems.push(`${r.type} ${r.id}: a delivered body differs from the stored envelope`)
    if (successes.get(r.id)?.length !== 1) deliveryProblems.push(`${r.type} ${r.id}: ${successes.get(r.id)?.length ?? 0} successful attempts logged`)
  }
  t.same(deliveryProblems.slice(0, 10), [], `every committed event was accepted by the receiver with its envelope, and logged delivered once (${rows.length} events)`)
  t.same(hooks.deliveries.filter(d => !d.verified || !rowIds.has(d.id)).map(d => `${d.json.type} ${d.id}`).slice(0, 10), [],
    `each of the ${hooks.deliveries.length} arrivals is signed with the tenant secret and is an outbox event`)

  // At least once: an event recorded delivered at the kill never came again; one that came again
  // was in flight (leased) at the kill.
  const again = [...arrivals].filter(([, list]) => list.length > 1).map(([id]) => id)
  t.same([...doneAtKill].filter(id => arrivals.get(id)?.length !== 1).map(id => `${byId.get(id)!.type} ${id}: ${arrivals.get(id)?.length ?? 0} arrivals`), [],
    `the ${doneAtKill.size} events recorded delivered before the kill arrived exactly once`)
  t.same(again.filter(id => !leasedAtKill.has(id)), [], 'only events in flight at the kill arrived more than once')
  t.comment(`at least once: ${leasedAtKill.size} events in flight at the kill, ${again.length} arrived again after the restart, ` +
    `${again.filter(id => acceptedAtKill.has(id)).length} of them duplicates of a 200 given before the kill that the dispatcher had not recorded`)

  // The deliveries cut short were redelivered by the restarted process, as a later attempt.
  const redelivery: string[] = []
  for (const id of leasedAtKill) {
    const r = byId.get(id)!
    if (!(arrivals.get(id) ?? []).some(d => d.answered === 200 && hooks.deliveries.indexOf(d) >= arrivalsBeforeRestart)) redelivery.push(`${r.type} ${id}: not accepted after the restart`)
    const attempt = successes.get(id)?.[0] ?? 0
    if (attempt <= r.attempts) redelivery.push(`${r.type} ${id}: delivered as attempt ${attempt}, ${r.attempts} claimed before the kill`)
  }
  t.same(redelivery, [], `the ${leasedAtKill.size} events leased at the kill were redelivered after the restart, each as a later attempt`)

  // Per session, first arrivals and first acceptances in id (= creation) order.
  const index = new Map(hooks.deliveries.map((d, i) => [d, i]))
  const position = (d: ReceivedDelivery | undefined) => (d ? index.get(d)! : Infinity)
  const orderProblems: string[] = []
  for (const s of sessions) {
    const own = rows.filter(r => r.sessionId === s.id)
    const created = own.map(r => r.type)
    if (created[0] !== 'session.created' || created[1] !== 'session.activated' || created.indexOf('session.expired') !== created.length - 1) {
      orderProblems.push(`${s.id}: events created as ${created.join(', ')}`)
    }
    for (const [label, pick] of [
      ['arrivals', (l: ReceivedDelivery[]) => l[0]],
      ['acceptances', (l: ReceivedDelivery[]) => l.find(d => d.answered === 200)],
    ] as const) {
      const got = [...own].sort((a, b) => position(pick(arrivals.get(a.id) ?? [])) - position(pick(arrivals.get(b.id) ?? [])))
      if (got.some((r, i) => r !== own[i])) orderProblems.push(`${s.id} first ${label}: ${got.map(r => `${r.type}#${own.indexOf(r)}`).join(', ')}`)
    }
  }
  t.same(orderProblems.slice(0, 10), [], 'per session, first arrivals and first acceptances follow creation order (created, activated, swaps, calls, expired last)')

  // Privacy: an event carries its proxy number and no other.
  const leaks = hooks.deliveries.filter(d => {
    const text = d.body + JSON.stringify(d.headers)
    return parties.some(p => text.includes(p)) || /\+\d{8,15}/.test(text.replaceAll(`"${String(d.json.data['proxyNumber'])}"`, ''))
  })
  t.same(leaks.map(d => d.body).slice(0, 3), [], 'no delivery carries a phone number other than its proxy number')
  for (const c of children) t.same(linesWithPhoneNumbers(c.lines).slice(0, 3), [], `no log line of child ${c.pid} carries a phone number`)
  t.comment(`${hooks.deliveries.length} arrivals of ${rows.length} events in ${((Date.now() - started) / 1000).toFixed(1)} s`)
})
