// The graceful stop (docs/operations.md): a child service (real Postgres when TEST_DATABASE_URL is set, else
// the embedded PGlite in DATA_DIR) takes voice callbacks, inbound SMS and session creates from
// concurrent clients, and gets SIGTERM in the middle of it, with requests in flight. Then:
// - readiness: 200 before, 503 "draining" at once after SIGTERM (asked on a connection opened
//   before it; a new connection is refused from then on);
// - a WebSocket stream client gets close code 1001;
// - every request sent before SIGTERM is answered, and the child exits 0;
// - afterwards, read from the database with the child gone and NOT restarted (a restart would
//   replay the write-behind journal and hide a writer that was not drained): every answered voice
//   fetch has its call record, every SMS acknowledged with 200 its sms_records row, every session
//   answered 201 its row.
// Real Postgres: the test holds a SHARE lock on call_records across the SIGTERM, so the record
// writer's batches (call rows, and the SMS rows committed with them) cannot be in Postgres when
// the drain starts: the child's "draining" line must count them pending, and they are found
// afterwards only if the stop waited for the writer. The lock is released 1 s into the drain.
// Twice:
// - mixed: voice, SMS and creates, the writer at its default 10 ms group commit;
// - stretched: voice and creates with the writer's group commit stretched to RECORD_FLUSH_MS=2000,
//   so the records of the calls answered in the last two seconds before SIGTERM are only in the
//   writer's memory (and its journal) when the drain starts, on both backends: found in the
//   database afterwards only if the stop drained the writer (an inbound SMS waits for its record,
//   and would be answered 503 past its budget at that interval, so this run sends none). With the
//   writer's close taken out of RunningService.close(), this run fails: every call record missing.
import t from 'tap'
import { connect, type Socket } from 'node:net'
import { sql } from 'slonik'
import { CallbackDriver } from '../support/callback-driver.js'
import { childData, request, signupChild, startChild } from '../support/child-service.js'
import { connectWs } from '../support/ws-client.js'
import { callIdOf, createSessions, phoneSource } from './lib.js'

const SESSIONS = 5
/** Clients of each kind running at once. */
const VOICE_CLIENTS = 12
const SMS_CLIENTS = 6
const CREATE_CLIENTS = 2
/** Real Postgres: the lock on call_records is taken at this many answered voice fetches. */
const LOCK_AT = 100
/** SIGTERM once this many voice fetches were answered (and the lock is held). */
const TERM_AFTER = 150
/** At most this many creates (the tenant's 100 requests a minute). */
const MAX_CREATES = 40

/** One HTTP/1.1 request on an open keep-alive socket; resolves with status and body. */
function askOn(sock: Socket, path: string): Promise<{ status: number; body: string; close: boolean }> {
  return new Promise((resolve, reject) => {
    let buf = ''
    const onData = (d: Buffer) => {
      buf += d.toString('latin1')
      const end = buf.indexOf('\r\n\r\n')
      if (end === -1) return
      const head = buf.slice(0, end)
      const len = Number(/content-length: *(\d+)/i.exec(head)?.[1] ?? 0)
      if (buf.length < end + 4 + len) return
      sock.off('data', onData)
      sock.off('error', reject)
      resolve({ status: Number(head.slice(9, 12)), body: buf.slice(end + 4, end + 4 + len), close: /\r\nconnection: *close/i.test(head) })
    }
    sock.on('data', onData)
    sock.once('error', reject)
    sock.once('close', () => reject(new Error(`connection closed before the answer to ${path}`)))
    sock.write(`GET ${path} HTTP/1.1\r\nhost: x\r\n\r\n`)
  })
}

function openSocket(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1', () => { s.off('error', reject); resolve(s) })
    s.once('error', reject)
  })
}

for (const mode of ['mixed', 'stretched'] as const) t.test(`SIGTERM under load (${mode}): readiness 503, 1001 to stream clients, every answered record in the database, exit 0`, async t => {
  const data = await childData(t)
  t.comment(`backend: ${data.kind}`)
  const child = await startChild(t, data, { env: { SHUTDOWN_GRACE_SECONDS: '10', METRICS_PORT: 'off', ...(mode === 'stretched' ? { RECORD_FLUSH_MS: '2000' } : {}) } })
  const acct = await signupChild(child.url)
  const phone = phoneSource(7000)
  const sessions = await createSessions(child.url, acct.token, SESSIONS, phone)

  const probe = await openSocket(child.port)
  t.teardown(() => probe.destroy())
  const before = await askOn(probe, '/v1/health/ready')
  t.equal(before.status, 200, 'ready before SIGTERM')
  // A request held in flight across SIGTERM: its headers and half its body are sent now, the
  // rest once readiness was asked during the drain (the drain waits for it).
  const held = await openSocket(child.port)
  t.teardown(() => held.destroy())
  const heldBody = new URLSearchParams({ CallSid: `v3:sigterm-held-${process.pid}`, From: phone(), To: '+15550000000', CallStatus: 'ringing', Direction: 'inbound' }).toString()
  held.write(`POST /v1/webhooks/cpaas/voice HTTP/1.1\r\nhost: x\r\ncontent-type: application/x-www-form-urlencoded\r\ncontent-length: ${heldBody.length}\r\n\r\n${heldBody.slice(0, 10)}`)
  const heldAnswer = new Promise<string>(resolve => {
    let buf = ''
    held.on('data', d => { buf += d.toString('latin1') })
    held.on('close', () => resolve(buf))
    held.on('error', () => resolve(buf))
  })
  const ws = await connectWs(`${child.url}/v1/stream`, { headers: { authorization: `Bearer ${acct.token}` } })
  t.teardown(() => ws.socket.destroy())

  // Real Postgres: the lock is taken mid-load (at LOCK_AT answers) and SIGTERM follows once it
  // is held, so creates and SMS waiting on the writer are in flight at SIGTERM too.
  let releaseLock = () => {}
  let lockHeld: Promise<unknown> = Promise.resolve()
  const useLock = data.kind === 'postgres' && mode === 'mixed'
  let locked = !useLock
  const lockDb = useLock ? await data.open({ maximumPoolSize: 1 }) : null
  if (lockDb) t.teardown(() => lockDb.close())
  const takeLock = () => {
    if (!lockDb) return
    const released = new Promise<void>(r => { releaseLock = r })
    lockHeld = lockDb.pool.transaction(async tx => {
      await tx.query(sql.unsafe`LOCK TABLE call_records IN SHARE MODE`)
      locked = true
      await released
    })
  }

  const driver = new CallbackDriver({ baseUrl: child.url, mode: 'none' })
  let termAt = 0 // performance.now() when SIGTERM was sent
  let voiceAnswered = 0
  const calls: Array<{ callId: string; sentAt: number }> = []
  const smsAcked: Array<{ id: string; sentAt: number }> = []
  const created: Array<{ id: string; sentAt: number }> = []
  /** Requests sent before SIGTERM that got no answer, or an unexpected one. */
  const lostBefore: string[] = []
  let refusedAfter = 0
  let answeredAfter = 0
  let smsOther = 0
  let createOther = 0

  async function attempt(kind: string, sentAt: number, fn: () => Promise<void>): Promise<boolean> {
    try {
      await fn()
      if (termAt && sentAt > termAt) answeredAfter++
      return true
    } catch (err) {
      if (termAt && sentAt > termAt) { refusedAfter++; return false }
      lostBefore.push(`${kind}: ${String((err as Error).cause ?? err).slice(0, 120)}`)
      return false
    }
  }
  const stopped = () => termAt > 0 && performance.now() - termAt > 200

  const voice = async (c: number) => {
    for (let i = 0; !stopped(); i++) {
      const s = sessions[(c + i) % SESSIONS]!
      const sentAt = performance.now()
      const ok = await attempt('voice', sentAt, async () => {
        const r = await driver.voice({ from: i % 2 ? s.agent : s.customer, to: s.proxy, callSid: `v3:sigterm-${process.pid}-${c}-${i}` })
        const xml = await r.text()
        const callId = callIdOf(xml)
        if (r.status !== 200 || !callId) throw new Error(`voice HTTP ${r.status} ${xml.slice(0, 100)}`)
        calls.push({ callId, sentAt })
        if (++voiceAnswered === LOCK_AT) takeLock()
        if (voiceAnswered >= TERM_AFTER && locked && !termAt) { termAt = performance.now(); child.kill('SIGTERM') }
      })
      if (!ok && termAt) return
    }
  }
  const sms = async (c: number) => {
    for (let i = 0; !stopped(); i++) {
      const s = sessions[(c + i) % SESSIONS]!
      const id = `sigterm-sms-${process.pid}-${c}-${i}`
      const sentAt = performance.now()
      const ok = await attempt('sms', sentAt, async () => {
        const r = await driver.smsReceived({ from: i % 2 ? s.agent : s.customer, to: s.proxy, text: 'on my way', messageId: id })
        const body = await r.text()
        if (r.status === 200 && body === '{"ok":true}') smsAcked.push({ id, sentAt })
        else smsOther++ // 503 + Retry-After is allowed: the provider retries
      })
      if (!ok && termAt) return
    }
  }
  let creates = 0
  const create = async () => {
    while (!stopped() && creates < MAX_CREATES) {
      creates++
      const sentAt = performance.now()
      const ok = await attempt('create', sentAt, async () => {
        const r = await request(child.url, 'POST', '/v1/sessions', { token: acct.token, body: { agentPhone: phone(), customerPhone: phone() } })
        if (r.status === 201) created.push({ id: r.body.id, sentAt })
        else createOther++
      })
      if (!ok && termAt) return
    }
  }
  const load = Promise.all([
    ...Array.from({ length: VOICE_CLIENTS }, (_, c) => voice(c)),
    ...Array.from({ length: mode === 'mixed' ? SMS_CLIENTS : 0 }, (_, c) => sms(c)),
    ...Array.from({ length: CREATE_CLIENTS }, () => create()),
  ])

  // Readiness turns 503 at once: asked on the connection opened before, while the drain runs.
  while (!termAt) await new Promise(r => setTimeout(r, 2))
  const draining = await child.waitForLine(o => (o['msg'] === 'draining' ? o : undefined), 5_000, 'draining line')
  const during = await askOn(probe, '/v1/health/ready').catch(err => ({ status: 0, body: String(err), close: true }))
  t.equal(during.status, 503, `readiness 503 while draining (${during.body.slice(0, 80)})`)
  t.match(during.body, /"status":"draining"/)
  t.ok(during.close, 'the answer closes the connection')
  held.write(heldBody.slice(10))
  const heldText = await heldAnswer
  t.match(heldText, /^HTTP\/1\.1 200 /, `the request in flight at SIGTERM was answered (${JSON.stringify(heldText.slice(0, 60))})`)
  const fresh = await openSocket(child.port).then(s => { s.destroy(); return 'accepted' }, (err: NodeJS.ErrnoException) => err.code)
  t.equal(fresh, 'ECONNREFUSED', 'a new connection is refused once SIGTERM arrived')
  t.comment(`draining line: ${JSON.stringify({ inFlight: draining['inFlight'], recordsPending: draining['recordsPending'] })}`)
  if (useLock || mode === 'stretched') t.ok(Number(draining['recordsPending']) > 0, 'record operations were pending when the drain began')
  if (useLock) {
    const early = await Promise.race([child.exited.then(() => true), new Promise(r => setTimeout(() => r(false), 1_000))])
    t.notOk(early, 'the child waits for the record writer (it has not exited while the lock holds its records)')
    releaseLock()
    await lockHeld
  }
  t.equal(await ws.closed, 1001, 'the stream client got 1001 going away')
  const exit = await child.exited
  await load
  t.same(exit, { code: 0, signal: null }, 'the child exits 0')
  t.ok(child.lines.some(l => l.includes('"msg":"drained"')), 'the drained line was logged')
  t.same(lostBefore.slice(0, 10), [], `every request sent before SIGTERM was answered (${lostBefore.length} were not)`)
  t.comment(`answered: ${calls.length} voice, ${smsAcked.length} SMS acknowledged (${smsOther} other), ${created.length} creates (${createOther} other); ` +
    `after SIGTERM: ${answeredAfter} answered on open connections, ${refusedAfter} refused`)
  t.ok(calls.length >= TERM_AFTER && (mode === 'stretched' || smsAcked.length > 0) && created.length > 0, 'load of every kind was answered')

  // The database as the stopped child left it, without a restart.
  const db = await data.open()
  try {
    const callIds = calls.map(c => c.callId)
    const have = new Set(await db.pool.anyFirst(sql.unsafe`SELECT id FROM call_records WHERE id = ANY(${sql.array(callIds, 'uuid')})`) as readonly string[])
    const missingCalls = callIds.filter(id => !have.has(id))
    t.same(missingCalls.slice(0, 5), [], `every answered voice fetch has its call record (${missingCalls.length} of ${callIds.length} missing)`)
    const smsIds = smsAcked.map(m => m.id)
    const haveSms = new Set(await db.pool.anyFirst(sql.unsafe`SELECT provider_message_id FROM sms_records WHERE provider_message_id = ANY(${sql.array(smsIds, 'text')})`) as readonly string[])
    const missingSms = smsIds.filter(id => !haveSms.has(id))
    t.same(missingSms.slice(0, 5), [], `every acknowledged SMS has its record (${missingSms.length} of ${smsIds.length} missing)`)
    const sessionIds = created.map(c => c.id)
    const haveSessions = new Set(await db.pool.anyFirst(sql.unsafe`SELECT id FROM sessions WHERE id = ANY(${sql.array(sessionIds, 'uuid')})`) as readonly string[])
    const missingSessions = sessionIds.filter(id => !haveSessions.has(id))
    t.same(missingSessions, [], `every created session is stored (${missingSessions.length} of ${sessionIds.length} missing)`)
  } finally {
    await db.close()
  }
})
