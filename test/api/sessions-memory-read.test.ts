// contract D4: GET /v1/sessions/:id answers a live session from the engine's memory, and the answer is
// the one Postgres would give, in every state: metadata as created and merged (jsonb's key order
// too), grace changes, swaps, the end, call counters while the call records are still being
// written behind, replayed and rebuilt calls, and after a restart. Ended sessions come from Postgres.
import t, { type Test } from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { DatabasePool } from 'slonik'
import { findLiveByPartyHash, getSession } from '../../sql/sessions.js'
import { loadConfig } from '../../gateway/config.js'
import { startService } from '../../gateway/service.js'
import { CallbackDriver } from '../support/callback-driver.js'
import { startTestService, type Account, type TestService } from '../support/service.js'

/** The API's answer for a session and Postgres's, once the records queued so far are written. */
async function compare(t: Test, api: TestService, acct: Account, id: string, what: string, base = api.url) {
  await api.svc.flushRecords()
  const r = await fetch(`${base}/v1/sessions/${id}`, { headers: { authorization: `Bearer ${acct.token}` } })
  const mem = await r.json() as Record<string, unknown>
  const pg = await getSession(api.svc.db.pool, acct.tenantId, id)
  t.equal(r.status, 200, `${what}: 200`)
  t.same(mem, JSON.parse(JSON.stringify(pg)), `${what}: memory answers as Postgres does`)
  t.same(Object.keys(mem['metadata'] as object), Object.keys(pg!.metadata), `${what}: metadata keys in jsonb order`)
  return mem
}

/** Counts the statements a pool runs (any method), to show a read needs none. */
function countStatements(pool: DatabasePool): { n: number; restore(): void } {
  const methods = ['any', 'anyFirst', 'exists', 'many', 'manyFirst', 'maybeOne', 'maybeOneFirst', 'one', 'oneFirst', 'query', 'transaction', 'connect'] as const
  const counter = { n: 0, restore() {} }
  const saved = methods.map(m => [m, pool[m]] as const)
  for (const [m, fn] of saved) {
    (pool as unknown as Record<string, unknown>)[m] = (...args: unknown[]) => { counter.n++; return (fn as (...a: unknown[]) => unknown).apply(pool, args) }
  }
  counter.restore = () => { for (const [m, fn] of saved) (pool as unknown as Record<string, unknown>)[m] = fn }
  return counter
}

// Fixed secrets, so a second node on the same database reads the numbers and accepts the tokens.
const SECRETS = { JWT_SECRET: 'memory-read-test-secret-0123456789abcdef', PHONE_KEY: Buffer.alloc(32, 7).toString('base64') }

t.test('live sessions are read from memory, exactly as Postgres has them', async t => {
  const api = await startTestService(t, { env: SECRETS })
  const acct = await api.signup()
  const A = api.phone(401), B = api.phone(402), C = api.phone(403)
  const auth = { token: acct.token }

  // Keys out of jsonb order (jsonb sorts by byte length, then bytes), unicode, an integer-like
  // key, a "__proto__" key (data, kept by the body parser), every kind of flat value.
  const metadata = JSON.parse('{"zeta":1,"bb":true,"x":"é","10":"ten","__proto__":"p","ü":"u","n":-1.5e-7,"c":null}') as Record<string, unknown>
  const created = await api.req('POST', '/v1/sessions', { ...auth, body: { agentPhone: A, customerPhone: B, metadata } })
  t.equal(created.status, 201)
  const id = created.body.id as string
  t.ok(api.svc.engine.live(id as never), 'the session is in memory')
  await compare(t, api, acct, id, 'created')

  const patched = await api.req('PATCH', `/v1/sessions/${id}`, { ...auth, body: { metadata: { zeta: null, bb: 'flat', a: 2 } } })
  t.equal(patched.status, 200)
  t.same(patched.body.metadata, JSON.parse('{"a":2,"bb":"flat","zeta":null,"10":"ten","__proto__":"p","ü":"u","x":"é","n":-1.5e-7,"c":null}'), 'keys replaced and added, as jsonb || does')
  await compare(t, api, acct, id, 'metadata patched')
  await api.req('PATCH', `/v1/sessions/${id}`, { ...auth, body: { gracePeriodMinutes: 42 } })
  await compare(t, api, acct, id, 'grace changed')

  // Calls: counted the moment they are routed, before their records are written.
  const quick = new CallbackDriver({ baseUrl: api.url, mode: 'none' })
  const proxy = created.body.proxyNumber as string
  const v1 = await quick.voice({ from: A, to: proxy, callSid: 'CA-mem-1' })
  t.equal(v1.status, 200)
  const now1 = await api.req('GET', `/v1/sessions/${id}`, auth)
  t.equal(now1.body.callCount, 1, 'the call counts at once, while its record is written behind')
  t.ok(now1.body.lastCallAt, 'lastCallAt set at once')
  await compare(t, api, acct, id, 'one call')
  await quick.voice({ from: B, to: proxy, callSid: 'CA-mem-2' })
  await quick.voice({ from: A, to: proxy, callSid: 'CA-mem-1' }) // a replay changes nothing
  const now2 = await api.req('GET', `/v1/sessions/${id}`, auth)
  t.equal(now2.body.callCount, 2, 'a replayed CallSid is not counted twice')
  await compare(t, api, acct, id, 'two calls and a replay')

  // A record the voice fetch never queued (lost in a crash window) is rebuilt from a later
  // callback: Postgres counts it, so memory does too.
  const lostId = '0190c6b0-0000-7000-8000-00000000abcd'
  await api.driver.dialStatus({ callId: lostId, callSid: 'CA-mem-lost', dialCallStatus: 'completed', dialCallDuration: 5 })
  await api.driver.postForm(`/voice/dial-status?callId=${lostId}`, { CallSid: 'CA-mem-lost-2', From: B, To: proxy, DialCallStatus: 'completed', DialCallDuration: 5 })
  const rebuilt = await compare(t, api, acct, id, 'a rebuilt call')
  t.equal(rebuilt['callCount'], 3, 'the rebuilt record counts')

  t.test('nothing of a read goes to Postgres', async t => {
    await api.req('GET', `/v1/sessions/${id}`, auth) // warm the token cache
    const spy = countStatements(api.svc.db.pool)
    t.teardown(() => spy.restore())
    let ok = 0
    for (let i = 0; i < 40; i++) if ((await api.req('GET', `/v1/sessions/${id}`, auth)).status === 200) ok++
    spy.restore()
    t.equal(ok, 40, 'every read answered')
    // Background work (the webhook dispatcher's poll) may run a statement or two meanwhile; reads
    // from Postgres would be 40 (the tier allows 100 requests a minute, so a few dozen it is).
    t.ok(spy.n < 8, `40 reads ran ${spy.n} statements`)
  })

  t.test('a swap, the end, and expiry', async t => {
    const s2 = await api.req('POST', '/v1/sessions', { ...auth, body: { agentPhone: C, customerPhone: api.phone(404), metadata: { k: 1 } } })
    const id2 = s2.body.id as string
    t.equal((await api.req('PATCH', `/v1/sessions/${id2}/target`, { ...auth, body: { customerPhone: api.phone(405) } })).status, 200)
    await compare(t, api, acct, id2, 'swapped')
    t.equal((await api.req('POST', `/v1/sessions/${id2}/end`, auth)).status, 200)
    await compare(t, api, acct, id2, 'in its grace period')
    await api.req('PATCH', `/v1/sessions/${id2}`, { ...auth, body: { gracePeriodMinutes: 0 } })
    await api.svc.expireDue()
    t.notOk(api.svc.engine.live(id2 as never), 'an expired session leaves memory')
    const gone = await compare(t, api, acct, id2, 'expired (from Postgres)')
    t.equal(gone['state'], 'EXPIRED')
  })

  t.test('verify answers from memory as Postgres would', async t => {
    const salt = (await api.svc.tenants.get(acct.tenantId))!.salt
    async function check(phone: string, what: string) {
      const r = await api.req('GET', `/v1/sessions/verify?userPhone=${encodeURIComponent(phone)}`, auth)
      const pg = await findLiveByPartyHash(api.svc.db.pool, acct.tenantId, api.svc.services.hashParty(salt, phone))
      t.equal(r.status, 200, `${what}: 200`)
      t.same(r.body, pg ? { verified: true, sessionId: pg.id, proxyNumber: pg.proxyNumber, metadata: pg.metadata } : { verified: false }, `${what}: as Postgres`)
      return r.body as { verified: boolean; sessionId?: string }
    }
    const D = api.phone(410), E = api.phone(411), F = api.phone(412)
    t.equal((await check(D, 'nobody')).verified, false)
    const first = await api.req('POST', '/v1/sessions', { ...auth, body: { agentPhone: D, customerPhone: E, metadata: { n: 1 } } })
    t.equal((await check(D, 'the agent')).sessionId, first.body.id)
    t.equal((await check(E, 'the customer')).sessionId, first.body.id)
    const second = await api.req('POST', '/v1/sessions', { ...auth, body: { agentPhone: F, customerPhone: D } })
    t.equal((await check(D, 'in two sessions')).sessionId, second.body.id, 'the newest')
    await api.req('PATCH', `/v1/sessions/${first.body.id}/target`, { ...auth, body: { customerPhone: api.phone(413) } })
    t.equal((await check(E, 'swapped away')).verified, false)
    await api.req('POST', `/v1/sessions/${second.body.id}/end`, auth)
    t.equal((await check(F, 'in its grace period')).sessionId, second.body.id)
    await api.req('PATCH', `/v1/sessions/${second.body.id}`, { ...auth, body: { gracePeriodMinutes: 0 } })
    await api.svc.expireDue()
    t.equal((await check(D, 'one expired')).sessionId, first.body.id)
    t.equal((await check(F, 'expired')).verified, false)
  })

  t.test("another tenant's live session is not found", async t => {
    const other = await api.signup()
    const r = await api.req('GET', `/v1/sessions/${id}`, { token: other.token })
    t.equal(r.status, 404)
  })

  t.test('after a restart, memory is rebuilt with the same answers', async t => {
    await api.svc.flushRecords()
    const dataDir = mkdtempSync(join(tmpdir(), 'maskline-mem-'))
    t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
    const second = await startService({
      config: loadConfig({ ...SECRETS, PORT: '0', DATA_DIR: dataDir, LOG_LEVEL: 'silent' }), db: api.svc.db, checkResponses: true,
    })
    t.teardown(() => second.close())
    t.ok(second.engine.live(id as never), 'loaded at boot')
    await compare(t, api, acct, id, 'after a restart', second.url)
    // The new process does not know CA-mem-1 was recorded: it counts it, then takes it back when
    // Postgres inserts nothing.
    const replay = new CallbackDriver({ baseUrl: second.url, mode: 'none', settled: () => second.flushRecords() })
    await replay.voice({ from: A, to: proxy, callSid: 'CA-mem-1' })
    await second.flushRecords()
    await new Promise(r => setImmediate(r))
    const after = await compare(t, api, acct, id, 'a replay after a restart', second.url)
    t.equal(after['callCount'], 3, 'still three calls')
  })
})
