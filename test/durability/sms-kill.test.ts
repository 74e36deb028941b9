// Inbound SMS acknowledged to the provider, then a SIGKILL (contract D5: `POST /sms`
// answers 200 once the forward is handed to the provider, else 503 + Retry-After and the provider
// retries with the same message id, which never forwards twice). Once a provider: a child service
// with CPAAS_PROVIDER=telnyx (the real telnyx SDK against test/support/fake-telnyx.ts; Ed25519
// signed callbacks), then CPAAS_PROVIDER=twilio (the real twilio SDK against
// test/support/fake-twilio.ts; Twilio-signed form callbacks); real Postgres when
// TEST_DATABASE_URL is set, else the embedded PGlite in DATA_DIR takes a flood of inbound SMS, each with a unique message id and its id as a marker in
// the text, so the fake can tell which inbound message each send forwards. It is SIGKILLed
// mid-flood and restarted on the same data; the test then is the provider: every message that did
// not get 200 {"ok":true} is sent again (same id, same text) until it does. Then:
// - every message acknowledged with 200 had reached the fake (a send carrying its marker) before
//   its acknowledgement: no acknowledged message is lost, before or after the kill;
// - every message was forwarded at least once, and one acknowledged before the kill is not
//   forwarded again after the restart (at most once);
// - every forwarded message has its sms_records row, SENT or DELIVERED.
import t from 'tap'
import { sql, type DatabasePool } from 'slonik'
import { CallbackDriver, DIALECTS, generateTelnyxKeyPair, type DialectName } from '../support/callback-driver.js'
import { childData, request, signupChild, startChild } from '../support/child-service.js'
import { FakeTelnyx } from '../support/fake-telnyx.js'
import { FAKE_ACCOUNT_SID, FAKE_AUTH_TOKEN, FakeTwilio } from '../support/fake-twilio.js'
import { createSessions, eventually, mapLimit, phoneSource } from './lib.js'

const SESSIONS = 5
const MESSAGES = 300
const FLOOD_CONCURRENCY = 20
/** The kill comes as this many messages have been acknowledged. */
const KILL_AFTER = 100
/** The fake answers each send this late, so some are in flight at the kill. */
const SEND_LATENCY_MS = 20
/** How long the test, as the provider, keeps retrying one message after the restart. */
const RETRY_FOR_MS = 30_000

interface Msg {
  id: string
  text: string
  from: string
  proxy: string
  /** Acknowledgements received (200 {"ok":true}), as Date.now() when the answer was read. */
  acks: number[]
  /** Other answers, for the evidence. */
  others: string[]
}

const marker = (text: unknown) => (typeof text === 'string' ? /\[(sms-kill-[^\]]+)\]/.exec(text)?.[1] : undefined)

/** The provider's fake, the child's environment for it, and its callback driver. */
async function provider(dialect: DialectName): Promise<{ fake: FakeTelnyx | FakeTwilio; text: (body: unknown) => unknown; env: Record<string, string>; driver: (url: string) => CallbackDriver }> {
  if (dialect === 'twilio') {
    const fake = await FakeTwilio.start()
    return {
      fake, text: (body: unknown) => (body as { Body?: unknown } | undefined)?.Body,
      env: { CPAAS_PROVIDER: 'twilio', TWILIO_ACCOUNT_SID: FAKE_ACCOUNT_SID, TWILIO_AUTH_TOKEN: FAKE_AUTH_TOKEN, TWILIO_BASE_URL: fake.baseUrl },
      driver: (url: string) => new CallbackDriver({ baseUrl: url, mode: 'twilio', hmacSecret: FAKE_AUTH_TOKEN }),
    }
  }
  const keys = generateTelnyxKeyPair()
  const fake = await FakeTelnyx.start({ apiKey: 'KEY_test' })
  return {
    fake, text: (body: unknown) => (body as { text?: unknown } | undefined)?.text,
    env: { CPAAS_PROVIDER: 'telnyx', TELNYX_API_KEY: 'KEY_test', TELNYX_BASE_URL: fake.baseURL, TELNYX_PUBLIC_KEY: keys.publicKeyBase64 },
    driver: (url: string) => new CallbackDriver({ baseUrl: url, mode: 'telnyx-ed25519', keyPair: keys }),
  }
}

for (const dialect of DIALECTS) t.test(`SIGKILL mid-flood of inbound SMS (${dialect}): no acknowledged message is lost, none acknowledged is forwarded twice`, async t => {
  const data = await childData(t)
  t.comment(`backend: ${data.kind}`)
  const { fake, text, env, driver } = await provider(dialect)
  t.teardown(() => fake.close())
  /** marker → when the fake received each send carrying it (Date.now() of this process). */
  const sends = new Map<string, number[]>()
  fake.setBehaviour(req => {
    const m = marker(text(req.body))
    if (m) sends.set(m, [...(sends.get(m) ?? []), Date.now()])
    return { latencyMs: SEND_LATENCY_MS }
  })
  const first = await startChild(t, data, { env })
  const acct = await signupChild(first.url)
  const phone = phoneSource(5000)
  const sessions = await createSessions(first.url, acct.token, SESSIONS, phone)
  const msgs: Msg[] = Array.from({ length: MESSAGES }, (_, i) => {
    const s = sessions[i % SESSIONS]!
    const id = `sms-kill-${process.pid}-${i}`
    return { id, text: `see you at the gate [${id}]`, from: i % 2 === 0 ? s.customer : s.agent, proxy: s.proxy, acks: [], others: [] }
  })

  async function send(driver: CallbackDriver, m: Msg): Promise<{ ok: boolean; retryAfterMs: number }> {
    try {
      const r = await driver.smsReceived({ from: m.from, to: m.proxy, text: m.text, messageId: m.id })
      const body = await r.text()
      const at = Date.now()
      if (r.status === 200 && body === driver.smsAck) { m.acks.push(at); return { ok: true, retryAfterMs: 0 } }
      m.others.push(`HTTP ${r.status} ${body.slice(0, 100)}`)
      return { ok: false, retryAfterMs: 1_000 * Number(r.headers.get('retry-after') ?? 0) }
    } catch (err) {
      m.others.push(`no answer (${String((err as Error).cause ?? err).slice(0, 100)})`)
      return { ok: false, retryAfterMs: 0 }
    }
  }

  // The flood, until the kill.
  const driver1 = driver(first.url)
  let acked = 0
  let killed = false
  await mapLimit(msgs, FLOOD_CONCURRENCY, async m => {
    if (killed) return
    if ((await send(driver1, m)).ok && ++acked >= KILL_AFTER && !killed) {
      killed = true
      first.kill('SIGKILL')
    }
  })
  t.equal((await first.exited).signal, 'SIGKILL', 'the child died of SIGKILL')
  // Acknowledged by the child that was killed (an answer read just after the kill was sent before it).
  const ackedBeforeKill = msgs.filter(m => m.acks.length > 0)
  const sentBeforeKill = msgs.filter(m => m.acks.length > 0 || m.others.length > 0)
  t.comment(`flood: ${sentBeforeKill.length} messages posted, ${ackedBeforeKill.length} acknowledged, ` +
    `${sentBeforeKill.length - ackedBeforeKill.length} not (${[...new Set(sentBeforeKill.flatMap(m => m.others))].slice(0, 3).join('; ')}), ` +
    `${[...sends.keys()].length} forwarded to the fake by the kill`)
  const lostAtKill = ackedBeforeKill.filter(m => !sends.has(m.id))
  t.comment(`when the killed child had exited: ${lostAtKill.length} acknowledged messages had not reached the fake`)

  // Restart; the provider retries every message not acknowledged, until it is.
  const second = await startChild(t, data, { env })
  const restartedAt = second.spawnedAt
  const driver2 = driver(second.url)
  const gaveUp: string[] = []
  await mapLimit(msgs.filter(m => m.acks.length === 0), FLOOD_CONCURRENCY, async m => {
    const until = Date.now() + RETRY_FOR_MS
    for (;;) {
      const r = await send(driver2, m)
      if (r.ok) return
      if (Date.now() > until) { gaveUp.push(`${m.id}: ${m.others.slice(-3).join('; ')}`); return }
      // The provider's retry, after Retry-After (kept short here).
      await new Promise(res => setTimeout(res, Math.min(Math.max(r.retryAfterMs, 50), 500)))
    }
  })
  t.same(gaveUp.slice(0, 10), [], `after the restart every message is acknowledged when retried (${gaveUp.length} never were)`)
  const refusals = new Map<string, number>()
  for (const o of msgs.flatMap(m => m.others)) { const k = o.replace(/\d{3,}/g, 'N'); refusals.set(k, (refusals.get(k) ?? 0) + 1) }
  t.comment(`answers other than the acknowledgement: ${[...refusals].map(([k, n]) => `${n} × ${k}`).join('; ') || 'none'}`)

  // Forwards may still be on their way (they should not be: each was acknowledged after its
  // forward); wait until every message reached the fake, or 15 s.
  const settled = await eventually(async () => msgs.filter(m => !sends.has(m.id)).length, n => n === 0, { timeoutMs: 15_000 })
  t.comment(`${settled.value} messages not forwarded ${settled.ms} ms after the last acknowledgement`)

  // 1. Acknowledged only once the forward had reached the provider.
  const ackedUnsent = msgs.filter(m => m.acks.length > 0 && !(sends.get(m.id) ?? []).some(at => at <= m.acks[0]!))
  const lost = ackedBeforeKill.filter(m => !sends.has(m.id))
  t.same(lost.map(m => m.id).slice(0, 10), [], `acknowledged before the kill, never forwarded (lost): ${lost.length} of ${ackedBeforeKill.length}`)
  t.same(ackedUnsent.map(m => `${m.id}: acked at ${m.acks[0]}, sends ${JSON.stringify(sends.get(m.id) ?? [])}`).slice(0, 10), [],
    `every acknowledged message had reached the fake before its acknowledgement (${ackedUnsent.length} of ${msgs.length} had not)`)
  // 2. Forwarded at least once; those acknowledged before the kill at most once, none after the restart.
  const never = msgs.filter(m => !sends.has(m.id))
  t.same(never.map(m => m.id).slice(0, 10), [], `every message forwarded at least once (${never.length} never were)`)
  const again = ackedBeforeKill.filter(m => (sends.get(m.id) ?? []).some(at => at >= restartedAt) || (sends.get(m.id) ?? []).length > 1)
  t.same(again.map(m => `${m.id}: ${(sends.get(m.id) ?? []).length} sends, ${(sends.get(m.id) ?? []).filter(at => at >= restartedAt).length} after the restart`).slice(0, 10), [],
    `messages acknowledged before the kill are forwarded at most once, none after the restart (${again.length} were again)`)
  const twice = msgs.filter(m => (sends.get(m.id) ?? []).length > 1)
  t.comment(`forwarded twice: ${twice.length} (only allowed for messages in flight, not acknowledged, at the kill)`)
  const strays = fake.requests.filter(r => r.method === 'POST' && !marker(text(r.body))).length
  t.equal(strays, 0, 'every send at the fake carries a marker')

  // 3. Every forwarded message has its record, SENT or DELIVERED.
  const forwarded = msgs.filter(m => sends.has(m.id))
  const readRecords = async (pool: DatabasePool) => recordProblems(pool, forwarded.map(m => m.id))
  let problems: string[]
  if (data.kind === 'postgres') {
    const db = await data.open()
    t.teardown(() => db.close())
    const r = await eventually(() => readRecords(db.pool), p => p.length === 0, { timeoutMs: 20_000 })
    problems = r.value
  } else {
    // PGlite is held by the child: wait through the API, then stop it and read the database.
    const r = await eventually(async () => {
      let n = 0
      for (const s of sessions) {
        const list = await request(second.url, 'GET', `/v1/sessions/${s.id}/sms?limit=200`, { token: acct.token })
        if (list.status !== 200) return -list.status
        n += (list.body.data as Array<{ status: string }>).filter(x => x.status === 'SENT' || x.status === 'DELIVERED').length
      }
      return n
    }, n => n >= forwarded.length, { timeoutMs: 20_000, intervalMs: 2_000 }) // 5 lists a read: within the tenant's 100 requests a minute
    t.comment(`through the API: ${r.value} of ${forwarded.length} forwarded messages SENT or DELIVERED after ${r.ms} ms`)
    t.equal((await second.stop()).code, 0, 'the child stops cleanly')
    const db = await data.open()
    try {
      problems = await readRecords(db.pool)
    } finally {
      await db.close()
    }
  }
  t.same(problems, [], `each of the ${forwarded.length} forwarded messages has one sms_records row, SENT or DELIVERED`)
})

async function recordProblems(pool: DatabasePool, ids: readonly string[]): Promise<string[]> {
  const rows = await pool.any(sql.unsafe`SELECT provider_message_id, status FROM sms_records WHERE provider_message_id = ANY(${sql.array([...ids], 'text')})`) as readonly Record<string, any>[]
  const status = new Map(rows.map(r => [r['provider_message_id'] as string, r['status'] as string]))
  const kinds = new Map<string, string[]>()
  for (const id of ids) {
    const s = status.get(id)
    const kind = s === undefined ? 'no sms_records row' : s === 'SENT' || s === 'DELIVERED' ? null : `sms_records row ${s}`
    if (kind) kinds.set(kind, [...(kinds.get(kind) ?? []), id])
  }
  return [...kinds].map(([k, ex]) => `${ex.length} × ${k}: ${ex.slice(0, 4).join('; ')}${ex.length > 4 ? ' …' : ''}`)
}
