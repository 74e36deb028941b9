// Analytics reports (contract 4.5; contract D7: UTC hour/day buckets, ts = bucket start) over real
// data: sessions created and calls driven through the provider callbacks to COMPLETED, MISSED,
// FAILED, ANSWERED and RINGING at chosen instants of a clock the test moves.
import t, { type Test } from 'tap'
import { sql } from 'slonik'
import { startTestService, type Account } from '../support/service.js'
import { callSuccessRate, sessionsOverTime } from '../../sql/analytics.js'

const PERIOD = { periodStart: '2026-03-09T00:00:00Z', periodEnd: '2026-03-12T00:00:00Z' }

function qs(q: Record<string, string | undefined>): string {
  const parts = Object.entries(q).filter(([, v]) => v !== undefined).map(([k, v]) => `${k}=${encodeURIComponent(v!)}`)
  return parts.length ? `?${parts.join('&')}` : ''
}

t.test('analytics', async t => {
  let now = Date.parse('2026-03-09T10:15:00.000Z')
  const api = await startTestService(t, { now: () => now })
  const pool = api.svc.db.pool

  // Tokens live 900 s on the service's clock: a fresh one after the clock moved on.
  const tokens = new Map<string, { token: string; at: number }>()
  async function tokenOf(acct: Account): Promise<string> {
    const have = tokens.get(acct.tenantId)
    if (have && now - have.at < 600_000) return have.token
    const r = await api.req('POST', '/v1/auth/token', { body: { apiKey: acct.apiKey, apiSecret: acct.apiSecret } })
    if (r.status !== 200) throw new Error(`token: ${r.status} ${r.text}`)
    tokens.set(acct.tenantId, { token: r.body.accessToken, at: now })
    return r.body.accessToken
  }
  // Each tenant may make 100 requests a minute (contract 8.1): the clock steps past the window often.
  let requests = 0
  async function get(acct: Account, path: string) {
    if (++requests % 40 === 0) now += 61_000
    return api.req('GET', path, { token: await tokenOf(acct) })
  }
  const at = (iso: string) => { now = Date.parse(iso) }

  async function session(acct: Account, a: number, b: number, extra: Record<string, unknown> = {}) {
    const r = await api.req('POST', '/v1/sessions', { token: await tokenOf(acct), body: { agentPhone: api.phone(a), customerPhone: api.phone(b), ...extra } })
    if (r.status !== 201) throw new Error(`session: ${r.status} ${r.text}`)
    return r.body as { id: string; proxyNumber: string; createdAt: string }
  }
  let sids = 0
  /** A call fetched from the provider; then walked to `outcome`; resolves when it is stored so. */
  async function call(from: number, proxy: string, outcome: 'COMPLETED' | 'MISSED' | 'FAILED' | 'ANSWERED' | 'RINGING', seconds = 0) {
    const sid = `CA-an-${++sids}`
    const xml = await (await api.driver.voice({ from: api.phone(from), to: proxy, callSid: sid })).text()
    const callId = /callId=([0-9a-f-]{36})/.exec(xml)?.[1]
    if (!callId) throw new Error(`no call was bridged: ${xml}`)
    if (outcome === 'ANSWERED' || outcome === 'COMPLETED') await api.driver.status({ callId, callSid: `${sid}-leg`, callStatus: 'in-progress' })
    if (outcome === 'COMPLETED') await api.driver.dialStatus({ callId, callSid: sid, dialCallStatus: 'completed', dialCallDuration: seconds })
    if (outcome === 'MISSED') await api.driver.dialStatus({ callId, callSid: sid, dialCallStatus: 'no-answer' })
    if (outcome === 'FAILED') await api.driver.status({ callId, callSid: `${sid}-leg`, callStatus: 'failed' })
    await until(async () => (await pool.maybeOneFirst(sql.unsafe`SELECT status FROM call_records WHERE id = ${callId}`)) === outcome)
    return callId
  }
  async function until(ok: () => Promise<boolean>) {
    for (let i = 0; i < 200; i++) {
      if (await ok()) return
      await new Promise(r => setTimeout(r, 10))
    }
    throw new Error('timed out waiting for a write')
  }
  const eventCount = (tenantId: string) => pool.oneFirst(sql.unsafe`SELECT count(*)::int4 FROM billing_events WHERE tenant_id = ${tenantId}`) as Promise<number>

  // ---- the data -------------------------------------------------------------------------------
  const acct = await api.signup()
  const other = await api.signup()
  const sessions: { proxyNumber: string; createdAt: string }[] = []

  // Day 1, hour 10: two sessions; a completed call (61 s, recorded) and a missed one.
  const s1 = await session(acct, 1, 2, { recordingEnabled: true, consentPrompt: 'DEFAULT' })
  sessions.push(s1)
  at('2026-03-09T10:20:00.000Z')
  const c1 = await call(1, s1.proxyNumber, 'COMPLETED', 61)
  await api.driver.recording({ callId: c1, callSid: `CA-an-${sids}`, recordingSid: 'RE-an-1', recordingUrl: 'https://rec.example.test/an.mp3', recordingDuration: 61 })
  at('2026-03-09T10:25:00.000Z')
  await call(2, s1.proxyNumber, 'MISSED')
  at('2026-03-09T10:30:00.000Z')
  const foreign = await session(other, 101, 102)
  await call(101, foreign.proxyNumber, 'COMPLETED', 45)
  at('2026-03-09T10:40:00.000Z')
  sessions.push(await session(acct, 3, 4))
  // Hour 11: one session; a failed, an answered and a ringing call; one SMS each way of the relay.
  at('2026-03-09T11:05:00.000Z')
  const s3 = await session(acct, 5, 6)
  sessions.push(s3)
  at('2026-03-09T11:10:00.000Z')
  await call(5, s3.proxyNumber, 'FAILED')
  at('2026-03-09T11:12:00.000Z')
  await call(6, s3.proxyNumber, 'ANSWERED')
  at('2026-03-09T11:15:00.000Z')
  await call(5, s3.proxyNumber, 'RINGING')
  at('2026-03-09T11:20:00.000Z')
  await api.driver.smsReceived({ from: api.phone(2), to: s1.proxyNumber, text: 'hello', messageId: 'an-sms-1' })
  // Day 2: one session, one completed call of 30 s.
  at('2026-03-10T09:00:00.000Z')
  const s4 = await session(acct, 7, 8)
  sessions.push(s4)
  at('2026-03-10T09:05:00.000Z')
  await call(7, s4.proxyNumber, 'COMPLETED', 30)
  // Day 3: two completed calls and a missed one: 2/3 rounds up to 0.6667.
  at('2026-03-11T14:00:00.000Z')
  const s5 = await session(acct, 9, 10)
  sessions.push(s5)
  at('2026-03-11T14:01:00.000Z')
  await call(9, s5.proxyNumber, 'COMPLETED', 10)
  at('2026-03-11T14:02:00.000Z')
  await call(9, s5.proxyNumber, 'COMPLETED', 20)
  at('2026-03-11T14:03:00.000Z')
  await call(10, s5.proxyNumber, 'MISSED')
  at('2026-03-12T08:00:00.000Z')

  // Usage is written behind the answers (group commit): wait for the last of it.
  await until(async () => (await pool.oneFirst(sql.unsafe`
    SELECT count(*)::int4 FROM billing_events WHERE tenant_id = ${acct.tenantId} AND metric IN ('sms_sent', 'recording_minute')`)) === 2)
  const rentals = new Set(sessions.map(s => `${s.proxyNumber}|${s.createdAt.slice(0, 10)}`)).size

  t.test('usage: whole units per metric, all six present, and the event count', async t => {
    const r = await get(acct, `/v1/analytics/usage${qs(PERIOD)}`)
    t.equal(r.status, 200)
    const metrics = { session_created: 5, call_minute: 2 + 1 + 1 + 1, sms_sent: 1, sms_received: 1, recording_minute: 2, number_rental: rentals }
    t.same(r.body, {
      tenantId: acct.tenantId, periodStart: '2026-03-09T00:00:00.000Z', periodEnd: '2026-03-12T00:00:00.000Z',
      metrics, totalEvents: 5 + 4 + 1 + 1 + 1 + rentals,
    })
    t.equal(r.body.totalEvents, await eventCount(acct.tenantId), 'every event of the tenant is inside the period')

    const day1 = await get(acct, `/v1/analytics/usage${qs({ periodStart: '2026-03-09T10:00:00+00:00', periodEnd: '2026-03-09T11:00:00.000Z' })}`)
    t.match(day1.body.metrics, { session_created: 2, call_minute: 2, recording_minute: 2, sms_sent: 0, sms_received: 0 })

    const none = await get(acct, `/v1/analytics/usage${qs({ periodStart: '2026-01-01T00:00:00Z', periodEnd: '2026-02-01T00:00:00Z' })}`)
    t.same(none.body.metrics, { session_created: 0, call_minute: 0, sms_sent: 0, sms_received: 0, recording_minute: 0, number_rental: 0 })
    t.equal(none.body.totalEvents, 0)
  })

  t.test('usage: start inclusive, end exclusive, to the microsecond', async t => {
    const created = s3.createdAt // 2026-03-09T11:05:00.000Z
    const from = await get(acct, `/v1/analytics/usage${qs({ periodStart: created, periodEnd: '2026-03-09T11:06:00Z' })}`)
    t.equal(from.body.metrics.session_created, 1, 'an event at periodStart is counted')
    const upTo = await get(acct, `/v1/analytics/usage${qs({ periodStart: '2026-03-09T11:00:00Z', periodEnd: created })}`)
    t.equal(upTo.body.metrics.session_created, 0, 'an event at periodEnd is not')
    const justAfter = await get(acct, `/v1/analytics/usage${qs({ periodStart: '2026-03-09T11:00:00Z', periodEnd: '2026-03-09T11:05:00.000001Z' })}`)
    t.equal(justAfter.body.metrics.session_created, 1, 'a microsecond later it is')
  })

  t.test('sessions over time: UTC days (the default) and hours, sparse, oldest first', async t => {
    const days = await get(acct, `/v1/analytics/sessions-over-time${qs(PERIOD)}`)
    t.equal(days.status, 200)
    t.same(days.body, [
      { ts: '2026-03-09T00:00:00.000Z', count: 3 },
      { ts: '2026-03-10T00:00:00.000Z', count: 1 },
      { ts: '2026-03-11T00:00:00.000Z', count: 1 },
    ])
    const explicit = await get(acct, `/v1/analytics/sessions-over-time${qs({ ...PERIOD, granularity: 'day' })}`)
    t.same(explicit.body, days.body)
    const hours = await get(acct, `/v1/analytics/sessions-over-time${qs({ ...PERIOD, granularity: 'hour' })}`)
    t.same(hours.body, [
      { ts: '2026-03-09T10:00:00.000Z', count: 2 },
      { ts: '2026-03-09T11:00:00.000Z', count: 1 },
      { ts: '2026-03-10T09:00:00.000Z', count: 1 },
      { ts: '2026-03-11T14:00:00.000Z', count: 1 },
    ])
    const empty = await get(acct, `/v1/analytics/sessions-over-time${qs({ periodStart: '2026-03-12T00:00:00Z', periodEnd: '2026-03-13T00:00:00Z' })}`)
    t.same(empty.body, [])
  })

  t.test('sessions over time: periods with offsets, buckets still in UTC', async t => {
    // 12:00+02:00 = 10:00Z, 13:00+02:00 = 11:00Z; the '+' written raw, as people do by hand.
    const hour = await get(acct, '/v1/analytics/sessions-over-time?periodStart=2026-03-09T12:00:00+02:00&periodEnd=2026-03-09T13:00:00+02:00&granularity=hour')
    t.same(hour.body, [{ ts: '2026-03-09T10:00:00.000Z', count: 2 }])
    // A New York day (05:00Z to 05:00Z): the sessions of that window, in their UTC day buckets;
    // the bucket starts before periodStart (ts is the bucket start, contract D7).
    const ny = await get(acct, `/v1/analytics/sessions-over-time${qs({ periodStart: '2026-03-09T00:00:00-05:00', periodEnd: '2026-03-10T00:00:00-05:00' })}`)
    t.same(ny.body, [{ ts: '2026-03-09T00:00:00.000Z', count: 3 }])
    const atStart = await get(acct, `/v1/analytics/sessions-over-time${qs({ periodStart: s3.createdAt, periodEnd: '2026-03-09T12:00:00Z', granularity: 'hour' })}`)
    t.same(atStart.body, [{ ts: '2026-03-09T11:00:00.000Z', count: 1 }], 'start inclusive')
    const atEnd = await get(acct, `/v1/analytics/sessions-over-time${qs({ periodStart: '2026-03-09T11:00:00Z', periodEnd: s3.createdAt, granularity: 'hour' })}`)
    t.same(atEnd.body, [], 'end exclusive')
  })

  t.test('buckets are UTC whatever the connection time zone', async t => {
    // +05:45: a local date_trunc would put every bucket 5 h 45 min off.
    const [hours, days] = await pool.connect(async c => {
      await c.query(sql.unsafe`SET TIME ZONE 'Asia/Kathmandu'`)
      try {
        const q = { tenantId: acct.tenantId, from: PERIOD.periodStart, to: PERIOD.periodEnd }
        return [await sessionsOverTime(c, { ...q, granularity: 'hour' }), await callSuccessRate(c, { ...q, granularity: 'day' })] as const
      } finally {
        await c.query(sql.unsafe`RESET TIME ZONE`)
      }
    })
    t.same(hours.map(b => b.ts), ['2026-03-09T10:00:00.000Z', '2026-03-09T11:00:00.000Z', '2026-03-10T09:00:00.000Z', '2026-03-11T14:00:00.000Z'])
    t.same(days.map(b => b.ts), ['2026-03-09T00:00:00.000Z', '2026-03-10T00:00:00.000Z', '2026-03-11T00:00:00.000Z'])
  })

  t.test('call success rate: outcomes per bucket, rate to 4 places', async t => {
    const days = await get(acct, `/v1/analytics/call-success-rate${qs(PERIOD)}`)
    t.equal(days.status, 200)
    t.same(days.body, [
      { ts: '2026-03-09T00:00:00.000Z', total: 5, answered: 1, completed: 1, missed: 1, failed: 1, rate: 0.4 },
      { ts: '2026-03-10T00:00:00.000Z', total: 1, answered: 0, completed: 1, missed: 0, failed: 0, rate: 1 },
      { ts: '2026-03-11T00:00:00.000Z', total: 3, answered: 0, completed: 2, missed: 1, failed: 0, rate: 0.6667 },
    ])
    const hours = await get(acct, `/v1/analytics/call-success-rate${qs({ ...PERIOD, granularity: 'hour' })}`)
    t.same(hours.body, [
      { ts: '2026-03-09T10:00:00.000Z', total: 2, answered: 0, completed: 1, missed: 1, failed: 0, rate: 0.5 },
      // FAILED + ANSWERED + RINGING: the ringing call counts in total only; 1/3 rounds down.
      { ts: '2026-03-09T11:00:00.000Z', total: 3, answered: 1, completed: 0, missed: 0, failed: 1, rate: 0.3333 },
      { ts: '2026-03-10T09:00:00.000Z', total: 1, answered: 0, completed: 1, missed: 0, failed: 0, rate: 1 },
      { ts: '2026-03-11T14:00:00.000Z', total: 3, answered: 0, completed: 2, missed: 1, failed: 0, rate: 0.6667 },
    ])
    const none = await get(acct, `/v1/analytics/call-success-rate${qs({ periodStart: '2026-03-12T00:00:00Z', periodEnd: '2026-03-13T00:00:00Z' })}`)
    t.same(none.body, [], 'empty array when there are no calls')
  })

  t.test('calls: totals, average duration, by status and direction, with filters', async t => {
    const all = await get(acct, `/v1/analytics/calls${qs(PERIOD)}`)
    t.equal(all.status, 200)
    t.same(all.body, {
      periodStart: '2026-03-09T00:00:00.000Z', periodEnd: '2026-03-12T00:00:00.000Z',
      total: 9,
      avgDurationSeconds: 13.44, // (61 + 30 + 10 + 20) / 9 calls
      byStatus: [
        { status: 'RINGING', count: 1 }, { status: 'ANSWERED', count: 1 }, { status: 'COMPLETED', count: 4 },
        { status: 'MISSED', count: 2 }, { status: 'FAILED', count: 1 },
      ],
      byDirection: [{ direction: 'A_TO_B', count: 6 }, { direction: 'B_TO_A', count: 3 }],
    })
    const completed = await get(acct, `/v1/analytics/calls${qs({ ...PERIOD, status: 'COMPLETED' })}`)
    t.match(completed.body, { total: 4, avgDurationSeconds: 30.25, byStatus: [{ status: 'COMPLETED', count: 4 }], byDirection: [{ direction: 'A_TO_B', count: 4 }] })
    const inbound = await get(acct, `/v1/analytics/calls${qs({ ...PERIOD, direction: 'B_TO_A' })}`)
    t.same(inbound.body.byStatus, [{ status: 'ANSWERED', count: 1 }, { status: 'MISSED', count: 2 }])
    t.same(inbound.body.byDirection, [{ direction: 'B_TO_A', count: 3 }])
    t.equal(inbound.body.avgDurationSeconds, 0)
    const both = await get(acct, `/v1/analytics/calls${qs({ ...PERIOD, status: 'COMPLETED', direction: 'B_TO_A' })}`)
    t.same(both.body, { periodStart: '2026-03-09T00:00:00.000Z', periodEnd: '2026-03-12T00:00:00.000Z', total: 0, avgDurationSeconds: 0, byStatus: [], byDirection: [] })
    const offset = await get(acct, `/v1/analytics/calls${qs({ periodStart: '2026-03-09T11:00:00+01:00', periodEnd: '2026-03-09T12:00:00+01:00' })}`)
    t.same(offset.body, {
      periodStart: '2026-03-09T10:00:00.000Z', periodEnd: '2026-03-09T11:00:00.000Z', total: 2, avgDurationSeconds: 30.5,
      byStatus: [{ status: 'COMPLETED', count: 1 }, { status: 'MISSED', count: 1 }],
      byDirection: [{ direction: 'A_TO_B', count: 1 }, { direction: 'B_TO_A', count: 1 }],
    }, 'periods are echoed in UTC with milliseconds')
  })

  t.test('tenants see only their own data', async t => {
    const usage = await get(other, `/v1/analytics/usage${qs(PERIOD)}`)
    t.same(usage.body.metrics, { session_created: 1, call_minute: 1, sms_sent: 0, sms_received: 0, recording_minute: 0, number_rental: 1 })
    t.equal(usage.body.tenantId, other.tenantId)
    t.same((await get(other, `/v1/analytics/sessions-over-time${qs(PERIOD)}`)).body, [{ ts: '2026-03-09T00:00:00.000Z', count: 1 }])
    t.same((await get(other, `/v1/analytics/call-success-rate${qs(PERIOD)}`)).body, [
      { ts: '2026-03-09T00:00:00.000Z', total: 1, answered: 0, completed: 1, missed: 0, failed: 0, rate: 1 },
    ])
    t.match((await get(other, `/v1/analytics/calls${qs(PERIOD)}`)).body, { total: 1, avgDurationSeconds: 45 })
  })

  const ENDPOINTS = ['/v1/analytics/usage', '/v1/analytics/sessions-over-time', '/v1/analytics/call-success-rate', '/v1/analytics/calls']

  async function expectValidation(t: Test, path: string, errors: { field: string; issue: string }[]) {
    const r = await get(acct, path)
    t.equal(r.status, 400, path)
    t.match(r.headers.get('content-type'), /^application\/problem\+json/)
    t.match(r.body, { type: /\/errors\/validation$/, title: 'Request validation failed', status: 400, detail: String, instance: /^urn:maskline:err:/ })
    t.same(r.body.errors, errors, path)
  }

  t.test('periods are required, with an offset, and start must be before end', async t => {
    for (const path of ENDPOINTS) {
      await expectValidation(t, path, [{ field: 'periodStart', issue: 'required' }, { field: 'periodEnd', issue: 'required' }])
      await expectValidation(t, `${path}${qs({ periodStart: PERIOD.periodStart })}`, [{ field: 'periodEnd', issue: 'required' }])
      await expectValidation(t, `${path}${qs({ periodStart: '2026-03-09T00:00:00', periodEnd: PERIOD.periodEnd })}`, [{ field: 'periodStart', issue: 'invalid_format' }])
      await expectValidation(t, `${path}${qs({ periodStart: PERIOD.periodStart, periodEnd: '2026-03-12' })}`, [{ field: 'periodEnd', issue: 'invalid_format' }])
      await expectValidation(t, `${path}${qs({ periodStart: 'yesterday', periodEnd: '2026-02-30T00:00:00Z' })}`, [
        { field: 'periodStart', issue: 'invalid_format' }, { field: 'periodEnd', issue: 'invalid_format' },
      ])
      await expectValidation(t, `${path}${qs({ periodStart: PERIOD.periodStart, periodEnd: PERIOD.periodStart })}`, [{ field: 'periodEnd', issue: 'not_after_period_start' }])
      await expectValidation(t, `${path}${qs({ periodStart: PERIOD.periodEnd, periodEnd: PERIOD.periodStart })}`, [{ field: 'periodEnd', issue: 'not_after_period_start' }])
      // The same instant written in two offsets is still an empty period.
      await expectValidation(t, `${path}${qs({ periodStart: '2026-03-09T02:00:00+02:00', periodEnd: '2026-03-09T00:00:00Z' })}`, [{ field: 'periodEnd', issue: 'not_after_period_start' }])
      await expectValidation(t, `${path}${qs({ periodStart: '0000-01-01T00:00:00Z', periodEnd: PERIOD.periodEnd })}`, [{ field: 'periodStart', issue: 'out_of_range' }])
    }
  })

  t.test('granularity, status and direction are checked', async t => {
    for (const path of ['/v1/analytics/sessions-over-time', '/v1/analytics/call-success-rate']) {
      await expectValidation(t, `${path}${qs({ ...PERIOD, granularity: 'week' })}`, [{ field: 'granularity', issue: 'invalid_value' }])
      await expectValidation(t, `${path}${qs({ ...PERIOD, granularity: 'HOUR' })}`, [{ field: 'granularity', issue: 'invalid_value' }])
    }
    await expectValidation(t, `/v1/analytics/calls${qs({ ...PERIOD, status: 'BUSY' })}`, [{ field: 'status', issue: 'invalid_value' }])
    await expectValidation(t, `/v1/analytics/calls${qs({ ...PERIOD, direction: 'SIDEWAYS' })}`, [{ field: 'direction', issue: 'invalid_value' }])
  })

  t.test('the OpenAPI document lists the reports and their queries', async t => {
    const doc = (await api.req('GET', '/v1/openapi.json')).body
    for (const p of [...ENDPOINTS, '/v1/billing/usage', '/v1/billing/events', '/v1/billing/periods', '/v1/billing/pricing']) t.ok(doc.paths[p]?.get, p)
    const params = doc.paths['/v1/analytics/call-success-rate'].get.parameters as { name: string; required: boolean; schema: Record<string, unknown> }[]
    t.match(params, [
      { name: 'periodStart', required: true, schema: { format: 'date-time' } },
      { name: 'periodEnd', required: true, schema: { format: 'date-time' } },
      { name: 'granularity', required: false, schema: { enum: ['hour', 'day'], default: 'day' } },
    ])
  })

  t.test('tenant token only: 401 without one, 403 with a dashboard token', async t => {
    // The signup's dashboard token has expired on the moved clock (24 h): log in again.
    const login = await api.req('POST', '/v1/auth/dashboard/login', { body: { email: acct.email, password: acct.password } })
    t.equal(login.status, 200)
    for (const path of ENDPOINTS) {
      const anon = await api.req('GET', `${path}${qs(PERIOD)}`)
      t.equal(anon.status, 401)
      t.match(anon.body, { type: /\/errors\/unauthorized$/, status: 401 })
      const user = await api.req('GET', `${path}${qs(PERIOD)}`, { token: login.body.accessToken })
      t.equal(user.status, 403, `${path} refuses a user token`)
      t.match(user.body, { type: /\/errors\/forbidden$/, status: 403 })
    }
  })
})
