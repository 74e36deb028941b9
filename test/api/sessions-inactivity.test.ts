// contract D10: inactivityTimeoutMinutes through REST and the provider callbacks, on the
// service's own clock (moved by the test). A session with no call or SMS for that long ends as
// POST /end would (GRACE_PERIOD, grace applies, then session.expired), once; a call or SMS moves
// the deadline; activity only the store knows of (another node's record) counts; a node whose
// end the store refuses (another node ended or changed it first) takes the store's version.
import t from 'tap'
import { sql } from 'slonik'
import { uuidv7 } from '../../sql/vocabulary/ids.js'
import { startTestService } from '../support/service.js'

const MINUTE = 60_000

t.test('inactivity timeout', async t => {
  let offset = 0
  const api = await startTestService(t, { now: () => Date.now() + offset })
  const pool = api.svc.db.pool
  const acct = await api.signup()
  let parties = 0
  // The service's clock moves past the tenant token's 900 s: a new one every 10 minutes of it.
  let token = acct.token, mintedAt = 0
  const advance = async (ms: number) => {
    offset += ms
    await api.svc.expireDue()
    if (offset - mintedAt < 10 * MINUTE) return
    token = (await api.req('POST', '/v1/auth/token', { body: { apiKey: acct.apiKey, apiSecret: acct.apiSecret } })).body.accessToken
    api.secrets.add(token)
    mintedAt = offset
  }
  const get = async (id: string) => (await api.req('GET', `/v1/sessions/${id}`, { token })).body
  const stored = (id: string) => pool.one(sql.unsafe`SELECT state, version, ended_at, expires_at FROM sessions WHERE id = ${id}`) as Promise<{ state: string; version: number; ended_at: number | null; expires_at: number }>
  async function create(body: Record<string, unknown>) {
    const agent = api.phone(++parties), customer = api.phone(++parties)
    const r = await api.req('POST', '/v1/sessions', { token, body: { agentPhone: agent, customerPhone: customer, ...body } })
    t.equal(r.status, 201, r.text.slice(0, 200))
    return { ...(r.body as { id: string; proxyNumber: string; inactivityTimeoutMinutes: number | null }), agent, customer }
  }

  t.test('bad values are refused and change nothing', async t => {
    for (const v of [0, 10081, 1.5, '5']) {
      const agent = api.phone(++parties), customer = api.phone(++parties)
      const r = await api.req('POST', '/v1/sessions', { token, body: { agentPhone: agent, customerPhone: customer, inactivityTimeoutMinutes: v } })
      t.equal(r.status, 400, `create ${JSON.stringify(v)}`)
      t.match(r.body, { type: /\/errors\/validation$/, errors: [{ field: String }] })
    }
    const s = await create({})
    t.equal(s.inactivityTimeoutMinutes, null, 'none by default')
    for (const v of [0, 10081, 'x']) {
      const r = await api.req('PATCH', `/v1/sessions/${s.id}`, { token, body: { inactivityTimeoutMinutes: v } })
      t.equal(r.status, 400, `patch ${JSON.stringify(v)}`)
    }
    t.match(await stored(s.id), { state: 'ACTIVE', version: 1 }, 'unchanged')
  })

  t.test('idle for the timeout: ended as POST /end, grace applies, expired once', async t => {
    const s = await create({ inactivityTimeoutMinutes: 1, gracePeriodMinutes: 2 })
    t.equal(s.inactivityTimeoutMinutes, 1)
    await advance(MINUTE - 2_000)
    t.match(await get(s.id), { state: 'ACTIVE', endedAt: null })
    await advance(2_000)
    const ended = await get(s.id)
    t.match(ended, { state: 'GRACE_PERIOD', endedAt: String, inactivityTimeoutMinutes: 1 })
    t.equal(Date.parse(ended.expiresAt) - Date.parse(ended.endedAt), 2 * MINUTE, 'expiresAt = end + grace')
    t.match(await stored(s.id), { state: 'GRACE_PERIOD', version: 2 }, 'written once')
    // Still routes during the grace period, as after POST /end.
    const xml = await (await api.driver.voice({ from: s.agent, to: s.proxyNumber, callSid: `v3:grace-${s.id}` })).text()
    t.match(xml, /<Dial /)
    await advance(2 * MINUTE)
    t.match(await get(s.id), { state: 'EXPIRED' })
    await api.svc.flushRecords()
    t.same(await pool.anyFirst(sql.unsafe`SELECT type FROM outbox WHERE session_id = ${s.id} AND type LIKE 'session.%' ORDER BY id`),
      ['session.created', 'session.activated', 'session.expired'], 'no event for the end (as POST /end), one session.expired')
  })

  t.test('a call or an SMS moves the deadline', async t => {
    const s = await create({ inactivityTimeoutMinutes: 1 })
    await advance(50_000)
    t.equal((await api.driver.smsReceived({ from: s.customer, to: s.proxyNumber, text: 'still here', messageId: `m-${s.id}` })).status, 200)
    await advance(50_000) // 100 s after creation, 50 s after the SMS
    t.match(await get(s.id), { state: 'ACTIVE' }, 'the SMS counted')
    t.match(await (await api.driver.voice({ from: s.agent, to: s.proxyNumber, callSid: `v3:act-${s.id}` })).text(), /<Dial /)
    await advance(50_000) // 50 s after the call
    t.match(await get(s.id), { state: 'ACTIVE' }, 'the call counted')
    await advance(11_000)
    t.match(await get(s.id), { state: 'GRACE_PERIOD' }, '60 s after the call')
  })

  t.test('PATCH sets, restarts and switches off the timeout', async t => {
    const s = await create({})
    await advance(5 * MINUTE)
    const p = await api.req('PATCH', `/v1/sessions/${s.id}`, { token, body: { inactivityTimeoutMinutes: 1 } })
    t.equal(p.status, 200)
    t.equal(p.body.inactivityTimeoutMinutes, 1)
    await advance(50_000)
    t.match(await get(s.id), { state: 'ACTIVE' }, 'counted from the PATCH, not from the creation')
    const off = await api.req('PATCH', `/v1/sessions/${s.id}`, { token, body: { inactivityTimeoutMinutes: null } })
    t.equal(off.body.inactivityTimeoutMinutes, null)
    await advance(10 * MINUTE)
    t.match(await get(s.id), { state: 'ACTIVE' }, 'off')
    t.match((await api.req('GET', '/v1/sessions', { token })).body.data.find((x: { id: string }) => x.id === s.id), { inactivityTimeoutMinutes: null })
    await api.req('PATCH', `/v1/sessions/${s.id}`, { token, body: { inactivityTimeoutMinutes: 2 } })
    await advance(2 * MINUTE + 1_000)
    t.match(await get(s.id), { state: 'GRACE_PERIOD' })
    const r = await api.req('PATCH', `/v1/sessions/${s.id}`, { token, body: { inactivityTimeoutMinutes: 3 } })
    t.match(r.body, { state: 'GRACE_PERIOD', inactivityTimeoutMinutes: 3 }, 'stored on an ended session, where it does nothing')
  })

  t.test('activity only the store knows of counts; an end another node wrote is taken', async t => {
    const s = await create({ inactivityTimeoutMinutes: 1 })
    // Another node recorded an SMS of this session at +50 s: this node never saw it.
    await advance(50_000)
    await pool.query(sql.unsafe`
      INSERT INTO sms_records (id, session_id, tenant_id, provider_message_id, direction, status, sent_at)
      VALUES (${uuidv7()}, ${s.id}, ${acct.tenantId}, ${`other-node-${s.id}`}, 'A_TO_B', 'DELIVERED', ${new Date(Date.now() + offset).toISOString()})`)
    await advance(11_000)
    t.match(await get(s.id), { state: 'ACTIVE' }, 'the store refused the end: another node\'s SMS')
    t.match(await stored(s.id), { state: 'ACTIVE', version: 1 })
    await advance(50_000)
    t.match(await get(s.id), { state: 'GRACE_PERIOD' }, 're-armed from it: ended 60 s after that SMS')

    // Another node ended this one first (its own end, at +30 s): this node's end is refused and it
    // takes the stored version instead of writing its own.
    const o = await create({ inactivityTimeoutMinutes: 1, gracePeriodMinutes: 10 })
    const endedAt = Date.now() + offset + 30_000
    await pool.query(sql.unsafe`
      UPDATE sessions SET state = 'GRACE_PERIOD', ended_at = ${new Date(endedAt).toISOString()},
        expires_at = ${new Date(endedAt + 10 * MINUTE).toISOString()}, version = 2 WHERE id = ${o.id}`)
    await advance(61_000)
    const v = await get(o.id)
    t.match(v, { state: 'GRACE_PERIOD', endedAt: new Date(endedAt).toISOString() }, 'the other node\'s end, not a second one')
    t.match(await stored(o.id), { version: 2 }, 'nothing written twice')
  })
})
