// The webhook dispatcher (contract D6) against a real database (both backends) and a real HTTP
// receiver, driven by a test clock through runOnce().
import t, { type Test } from 'tap'
import { randomBytes } from 'node:crypto'
import { sql, type CommonQueryMethods } from 'slonik'
import { testDatabase } from '../support/db.js'
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver.js'
import { uuidv7 } from '../../sql/vocabulary/ids.js'
import { buildEnvelope, type EventEnvelope, type EventType } from '../../sql/vocabulary/event-envelope.js'
import { createLogger } from '../../api/log.js'
import { insertOutbox } from '../../sql/outbox.js'
import { claimDue, createSecretCipher, listDeliveries, putWebhookConfig, type DeliveryLogEntry } from '../../sql/webhooks.js'
import { createDispatcher, RETRY_SCHEDULE_MS, type DispatcherOptions } from '../../gateway/webhooks/dispatcher.js'
import { generateSecret } from '../../api/webhooks/signing.js'

class TestClock {
  t: number
  constructor(start: number) { this.t = start }
  now = (): number => this.t
  advance(ms: number): void { this.t += ms }
}

// One database for the file (opening one costs seconds on PGlite); each test gets its own
// tenant and starts from an empty outbox, since a dispatcher claims whatever is due.
let shared: ReturnType<typeof testDatabase> | null = null
const root = t

async function setup(t: Test, o: { events?: string[]; url?: (r: WebhookReceiver) => string; configured?: boolean } = {}) {
  const db = await (shared ??= testDatabase(root))
  const pool = db.pool
  await pool.query(sql.unsafe`DELETE FROM outbox`)
  // The outbox stamps rows with the database's now(); the test clock starts a little ahead of it.
  const clock = new TestClock(Date.now() + 2_000)
  const secret = generateSecret()
  const receiver = await startWebhookReceiver({ secret, now: clock.now })
  t.teardown(() => receiver.close())
  const phoneKey = randomBytes(32)
  const cipher = createSecretCipher(phoneKey)
  const tenantId = await seedTenant(pool)
  const subscribe = (events: string[]) => putWebhookConfig(pool, {
    tenantId, url: o.url ? o.url(receiver) : receiver.url, events, secretEnc: cipher.encrypt(secret), now: clock.now(),
  })
  if (o.configured !== false) await subscribe(o.events ?? ['session.created', 'session.activated', 'call.ended'])
  const logs: string[] = []
  const log = createLogger({ level: 'debug', destination: { write: (s: string) => { logs.push(s) } } })
  const dispatcher = (over: Partial<DispatcherOptions> = {}) => {
    const d = createDispatcher({ pool, log, now: clock.now, allowInsecure: true, secrets: cipher, timeoutMs: 1_000, ...over })
    t.teardown(() => d.stop())
    return d
  }
  const enqueue = async (type: EventType = 'session.created', sessionId = uuidv7()): Promise<EventEnvelope> => {
    const e = buildEnvelope(uuidv7(), type, clock.now(), { sessionId, tenantId, proxyNumber: '+12025550100', state: 'ACTIVE' })
    await insertOutbox(pool, [e])
    return e
  }
  const deliveries = async (): Promise<DeliveryLogEntry[]> => {
    const page = await listDeliveries(pool, { tenantId, limit: 200 })
    if (page === 'bad-cursor') throw new Error('bad cursor')
    return page.data.reverse() // oldest first
  }
  const outbox = (id: string) => pool.one(sql.unsafe`SELECT outcome, attempts, done_at IS NOT NULL AS done FROM outbox WHERE id = ${id}`)
  return { db, pool, clock, secret, receiver, cipher, tenantId, dispatcher, enqueue, deliveries, outbox, logs, subscribe }
}

async function seedTenant(db: CommonQueryMethods): Promise<string> {
  const id = uuidv7()
  await db.query(sql.unsafe`INSERT INTO tenants (id, name, salt) VALUES (${id}, ${`t-${id}`}, ${sql.binary(randomBytes(32))})`)
  return id
}

t.test('a 2xx delivers the event once, signed, and logs the attempt', async t => {
  const s = await setup(t)
  const d = s.dispatcher()
  const e = await s.enqueue('session.created')
  t.equal(await d.runOnce(), 1)
  t.equal(await d.runOnce(), 0, 'nothing left to do')
  s.clock.advance(48 * 3_600_000)
  t.equal(await d.runOnce(), 0, 'not redelivered later either')
  t.equal(s.receiver.deliveries.length, 1)
  const got = s.receiver.deliveries[0]!
  t.ok(got.verified, 'Standard Webhooks signature verifies with the tenant secret')
  t.equal(got.id, e.id, 'webhook-id is the event id')
  t.equal(got.timestamp, Math.floor((s.clock.now() - 48 * 3_600_000) / 1000), 'webhook-timestamp in seconds')
  t.same(got.json, e, 'the body is the envelope')
  t.equal(got.headers['content-type'], 'application/json')
  t.match(await s.outbox(e.id), { outcome: 'delivered', attempts: 1, done: true })
  t.match(await s.deliveries(), [{ event: 'session.created', url: s.receiver.url, statusCode: 200, success: true, attemptCount: 1, error: null }])
})

t.test('after a 500 the event is retried on the schedule until it succeeds', async t => {
  const s = await setup(t)
  const d = s.dispatcher()
  s.receiver.script({ status: 500 }, 2)
  const e = await s.enqueue()
  t.equal(await d.runOnce(), 1)
  t.equal(await d.runOnce(), 0, 'not again at once')
  s.clock.advance(4_999)
  t.equal(await d.runOnce(), 0, 'not before 5 s')
  s.clock.advance(1)
  t.equal(await d.runOnce(), 1, 'second attempt 5 s later')
  s.clock.advance(5 * 60_000 - 1)
  t.equal(await d.runOnce(), 0)
  s.clock.advance(1)
  t.equal(await d.runOnce(), 1, 'third attempt 5 min after the second')
  t.same(s.receiver.deliveries.map(r => r.answered), [500, 500, 200])
  t.ok(s.receiver.deliveries.every(r => r.verified && r.id === e.id), 'same webhook-id on every attempt')
  t.match(await s.deliveries(), [
    { statusCode: 500, success: false, attemptCount: 1, error: 'http-500' },
    { statusCode: 500, success: false, attemptCount: 2, error: 'http-500' },
    { statusCode: 200, success: true, attemptCount: 3, error: null },
  ])
  t.match(await s.outbox(e.id), { outcome: 'delivered', attempts: 3 })
})

t.test('a receiver that hangs times out (status 0, error timeout) and the event is redelivered', async t => {
  const s = await setup(t)
  const d = s.dispatcher({ timeoutMs: 300 })
  s.receiver.script('hang', 1)
  const e = await s.enqueue()
  const started = Date.now()
  t.equal(await d.runOnce(), 1)
  t.ok(Date.now() - started < 3_000, 'the attempt ended at the timeout')
  t.match(await s.deliveries(), [{ statusCode: 0, success: false, attemptCount: 1, error: 'timeout' }])
  s.clock.advance(5_000)
  t.equal(await d.runOnce(), 1)
  t.match(await s.outbox(e.id), { outcome: 'delivered', attempts: 2 })
  t.same(s.receiver.accepted().map(r => r.id), [e.id])
})

t.test('network errors: status 0 and a short code; eight attempts on the schedule, then failed', async t => {
  // Nothing listens on port 9 of 127.0.0.1: connection refused. The URL's query is a secret.
  const s = await setup(t, { url: () => 'http://127.0.0.1:9/hook?token=SECRET-QUERY-TOKEN' })
  const d = s.dispatcher()
  const e = await s.enqueue()
  const times: number[] = []
  for (let attempt = 1; attempt <= 8; attempt++) {
    if (attempt > 1) {
      s.clock.advance(RETRY_SCHEDULE_MS[attempt - 1]! - 1)
      t.equal(await d.runOnce(), 0, `attempt ${attempt} not early`)
      s.clock.advance(1)
    }
    times.push(s.clock.now())
    t.equal(await d.runOnce(), 1, `attempt ${attempt}`)
  }
  s.clock.advance(100 * 3_600_000)
  t.equal(await d.runOnce(), 0, 'given up after 8 attempts')
  const rows = await s.deliveries()
  t.equal(rows.length, 8)
  t.same(rows.map(r => r.attemptCount), [1, 2, 3, 4, 5, 6, 7, 8])
  t.ok(rows.every(r => r.statusCode === 0 && !r.success && r.error === 'connection-refused'))
  t.same(rows.map(r => Date.parse(r.requestedAt)), times)
  t.same(times.slice(1).map((x, i) => x - times[i]!), [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000],
    'contract D6: 0 s, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h')
  t.match(await s.outbox(e.id), { outcome: 'failed', attempts: 8, done: true })
  t.notOk(s.logs.some(l => l.includes('SECRET-QUERY-TOKEN')), 'the URL (and its query) is never logged')
  t.notOk(s.logs.some(l => l.includes(s.secret) || l.includes('whsec_')), 'the secret is never logged')
  t.ok(s.logs.some(l => /"msg":"webhook given up"/.test(l)))
})

t.test('per-session order: an event waits until the earlier ones of its session are done', async t => {
  const s = await setup(t)
  const d = s.dispatcher()
  const session = uuidv7()
  const e1 = await s.enqueue('session.created', session)
  const e2 = await s.enqueue('session.activated', session)
  const e3 = await s.enqueue('call.ended', session)
  const other = await s.enqueue('session.created')
  s.receiver.script({ status: 503 }, 1) // the first attempt fails
  t.equal(await d.runOnce(), 2, 'the head of each session')
  t.equal(await d.runOnce(), 0, 'e2 waits while e1 is pending a retry')
  s.clock.advance(5_000)
  while (await d.runOnce()) { /* drain */ }
  const accepted = s.receiver.accepted().map(r => r.id)
  t.same(accepted.filter(id => id !== other.id), [e1.id, e2.id, e3.id], 'delivered in the order of the session')
  t.ok(accepted.includes(other.id), 'another session is not held back by the failure')
  t.equal(s.receiver.deliveries.length, 5)
})

t.test('two dispatchers on one database deliver each event exactly once', async t => {
  const s = await setup(t)
  const d1 = s.dispatcher()
  const d2 = s.dispatcher({ pool: await s.db.createPool({ maximumPoolSize: 4 }) })
  const sessions = Array.from({ length: 10 }, () => uuidv7())
  const sent: string[] = []
  for (let i = 0; i < 60; i++) sent.push((await s.enqueue(i % 2 ? 'session.created' : 'call.ended', sessions[i % 10]!)).id)
  const counts = [0, 0]
  const pending = async () => Number(await s.pool.oneFirst(sql.unsafe`SELECT count(*) FROM outbox WHERE done_at IS NULL`))
  const drain = async (d: typeof d1, k: number) => {
    while (await pending() > 0) {
      const n = await d.runOnce()
      counts[k]! += n
    }
  }
  await Promise.all([drain(d1, 0), drain(d2, 1), drain(d1, 0), drain(d2, 1)])
  const ids = s.receiver.deliveries.map(r => r.id)
  t.equal(ids.length, 60, 'sixty requests')
  t.same([...ids].sort(), [...sent].sort(), 'each event once')
  t.equal(counts[0]! + counts[1]!, 60)
  t.ok(counts[0]! > 0 && counts[1]! > 0, `both dispatchers worked (${counts.join(' + ')})`)
  for (const session of sessions) {
    const mine = sent.filter((_, i) => i % 10 === sessions.indexOf(session))
    t.same(ids.filter(id => mine.includes(id)), mine, 'per-session order across dispatchers')
  }
})

t.test('a dispatcher that died mid-delivery: another one redelivers once the lease expires', async t => {
  const s = await setup(t)
  const e = await s.enqueue()
  // The crashed node: it claimed the event (a 30 s lease) and never finished.
  const leaseMs = 30_000
  const taken = await claimDue(s.pool, { limit: 10, leaseMs, now: s.clock.now() })
  t.same(taken.map(x => x.id), [e.id])
  const survivor = s.dispatcher({ leaseMs })
  t.equal(await survivor.runOnce(), 0, 'leased: not touched while the lease runs')
  s.clock.advance(leaseMs - 1)
  t.equal(await survivor.runOnce(), 0)
  s.clock.advance(1)
  t.equal(await survivor.runOnce(), 1, 'taken over when the lease expires')
  t.same(s.receiver.deliveries.map(r => r.id), [e.id])
  t.match(await s.deliveries(), [{ success: true, attemptCount: 2 }], 'the lost attempt counts')
  t.match(await s.outbox(e.id), { outcome: 'delivered' })
})

t.test('not subscribed, or no webhook: skipped without a request or a log row', async t => {
  // Decided when the event is written (sql/outbox.ts): nothing is due for the dispatcher.
  const s = await setup(t, { events: ['call.ended'] })
  const d = s.dispatcher()
  const e = await s.enqueue('sms.received')
  t.equal(await d.runOnce(), 0)
  t.match(await s.outbox(e.id), { outcome: 'skipped', done: true })
  t.equal(s.receiver.deliveries.length, 0)
  t.same(await s.deliveries(), [])

  const none = await setup(t, { configured: false })
  const d2 = none.dispatcher()
  const e2 = await none.enqueue('session.target_swapped')
  t.equal(await d2.runOnce(), 0)
  t.match(await none.outbox(e2.id), { outcome: 'skipped' })
  t.equal(none.receiver.deliveries.length, 0)

  // Unsubscribed after the event was written: the dispatcher skips it when it comes due.
  const later = await setup(t, { events: ['sms.received'] })
  const d3 = later.dispatcher()
  const e3 = await later.enqueue('sms.received')
  await later.subscribe(['call.ended'])
  t.equal(await d3.runOnce(), 1)
  t.match(await later.outbox(e3.id), { outcome: 'skipped', done: true })
  t.equal(later.receiver.deliveries.length, 0)
})

t.test('session.target_swapped is delivered to a configured webhook whatever the subscription', async t => {
  const s = await setup(t, { events: ['call.ended'] })
  const d = s.dispatcher()
  const e = buildEnvelope(uuidv7(), 'session.target_swapped', s.clock.now(), {
    sessionId: uuidv7(), tenantId: s.tenantId, proxyNumber: '+12025550100', timestamp: new Date(s.clock.now()).toISOString(),
  })
  await insertOutbox(s.pool, [e])
  t.equal(await d.runOnce(), 1)
  t.same(s.receiver.accepted().map(r => r.json), [e])
  t.match(await s.outbox(e.id), { outcome: 'delivered' })
})

t.test('the test event is delivered whatever the subscription', async t => {
  const s = await setup(t, { events: ['call.ended'] })
  const d = s.dispatcher()
  const e = buildEnvelope(uuidv7(), 'session.created', s.clock.now(), { sessionId: uuidv7(), tenantId: s.tenantId, proxyNumber: '+15555550100', test: true })
  await insertOutbox(s.pool, [e])
  t.equal(await d.runOnce(), 1)
  t.same(s.receiver.accepted().map(r => r.json), [e])
})

t.test('the SSRF guard applies on delivery: http and private targets are refused unless allowInsecure', async t => {
  const s = await setup(t)
  const secure = s.dispatcher({ allowInsecure: false })
  const e = await s.enqueue()
  t.equal(await secure.runOnce(), 1)
  t.equal(s.receiver.deliveries.length, 0, 'no request was made')
  t.match(await s.deliveries(), [{ statusCode: 0, success: false, error: 'insecure-scheme' }])

  const s2 = await setup(t, { url: () => 'https://127.0.0.1:1/hook' })
  const d2 = s2.dispatcher({ allowInsecure: false })
  await s2.enqueue()
  await d2.runOnce()
  t.match(await s2.deliveries(), [{ statusCode: 0, error: 'blocked-address' }])

  const s3 = await setup(t, { url: () => 'https://localtest.invalid.localhost/hook' })
  const d3 = s3.dispatcher({ allowInsecure: false })
  await s3.enqueue()
  await d3.runOnce()
  t.match(await s3.deliveries(), [{ statusCode: 0, error: 'blocked-address' }])
  t.ok(e)
})

t.test('start() polls, wake() delivers at once, stop() waits for attempts in flight', async t => {
  const s = await setup(t)
  const d = s.dispatcher({ now: Date.now, pollIntervalMs: 60_000 })
  d.start()
  await new Promise(r => setTimeout(r, 100)) // the first poll at start finds nothing
  const started = Date.now()
  const e = await s.enqueue()
  d.wake()
  await s.receiver.waitFor(1, 5_000)
  t.ok(Date.now() - started < 2_000, 'woken, not waiting for the 60 s poll')
  t.same(s.receiver.deliveries.map(r => r.id), [e.id])
  s.receiver.script('hang', 1)
  await s.enqueue()
  d.wake()
  await s.receiver.waitFor(2, 5_000)
  await d.stop() // returns once the hanging attempt timed out (1 s) and was recorded
  t.match((await s.deliveries()).at(-1), { error: 'timeout' })
})

t.test('a burst of wakes claims at most once per wakeGapMs (the first at once), not once per wake', async t => {
  // Every session create and every record batch wakes the dispatcher; most of their events are
  // for tenants without a webhook and written done, so each claim finds nothing. One claim per
  // wake, back to back, was a third of the service's CPU per create.
  const s = await setup(t, { configured: false })
  let claims = 0
  let claimsDone = 0
  let lastClaimAt = 0
  const counting = new Proxy(s.pool, {
    get(target, prop, receiver) {
      const v = Reflect.get(target, prop, receiver) as unknown
      if (prop !== 'any' || typeof v !== 'function') return v
      return async (q: { sql: string }, ...rest: unknown[]) => {
        const claim = q.sql.includes('UPDATE outbox')
        if (claim) { claims++; lastClaimAt = performance.now() }
        try { return await (v as (...a: unknown[]) => Promise<unknown>).call(target, q, ...rest) } finally { if (claim) claimsDone++ }
      }
    },
  })
  const d = s.dispatcher({ pool: counting, now: Date.now, pollIntervalMs: 60_000, wakeGapMs: 50 })
  d.start()
  // The poll at start, then quiet: its claim has returned (it can take longer than the gap on a
  // slow embedded Postgres) and the gap since it has passed.
  for (const end = Date.now() + 10_000; (claims === 0 || claimsDone < claims) && Date.now() < end;) await new Promise(r => setTimeout(r, 5))
  await new Promise(r => setTimeout(r, 70))
  const before = claims
  d.wake()
  t.equal(claims - before, 1, 'the first wake after a quiet spell claims at once')
  const t0 = Date.now()
  let lastWakeAt = 0
  while (Date.now() - t0 < 200) {
    d.wake()
    lastWakeAt = performance.now()
    await new Promise(r => setTimeout(r, 1))
  }
  // The wakes of the burst's last gap are owed a claim once the gap (and a claim still running) has passed.
  for (const end = Date.now() + 5_000; lastClaimAt < lastWakeAt && Date.now() < end;) await new Promise(r => setTimeout(r, 10))
  const elapsed = Date.now() - t0
  t.ok(claims - before <= Math.ceil(elapsed / 50) + 2, `${claims - before} claims for ~${Math.round(elapsed)} ms of wakes every millisecond (gap 50 ms)`)
  t.ok(lastClaimAt >= lastWakeAt, 'wakes during the gap are not lost: a claim follows the last one')
})

t.test('extra targets (a Twilio Proxy callback_url): each attempted and logged on its own; a retry skips those reached', async t => {
  const s = await setup(t)
  const other = await startWebhookReceiver()
  t.teardown(() => other.close())
  const d = s.dispatcher({
    extraTargets: async ev => ev.type === 'call.ended' ? [{ url: other.url, sign: () => ({ body: 'a=1', headers: { 'x-extra': 'yes' }, contentType: 'application/x-www-form-urlencoded' }) }] : [],
  })
  other.script({ status: 500 })
  const e = await s.enqueue('call.ended')
  t.equal(await d.runOnce(), 1)
  t.match(await s.outbox(e.id), { outcome: null, attempts: 1, done: false }, 'not done while one target failed')
  s.clock.advance(5_000)
  t.equal(await d.runOnce(), 1)
  t.equal(s.receiver.deliveries.length, 1, 'the tenant webhook, reached the first time, is not called again')
  t.same(other.deliveries.map(r => r.answered), [500, 200])
  t.match(other.deliveries[1], { body: 'a=1', headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-extra': 'yes' } })
  t.match(await s.outbox(e.id), { outcome: 'delivered', attempts: 2 })
  const log = (await s.deliveries()).map(r => `${r.url === other.url ? 'extra' : 'own'} ${r.attemptCount} ${r.success}`).sort()
  t.same(log, ['extra 1 false', 'extra 2 true', 'own 1 true'], 'each attempt logged under its URL')
})
