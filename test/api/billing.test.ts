// Billing reads (contract 2.5-2.7, 4.6, 8.5; contract D7): raw events with the unit price in force
// for the tenant's tier, calendar-month periods opened on first use and listed newest first,
// the seeded price list, usage as in analytics. Real data: sessions over three months and a
// call walked to COMPLETED through the provider callbacks, on a clock the test moves.
import t, { type Test } from 'tap'
import { sql } from 'slonik'
import { startTestService, type Account } from '../support/service.js'

const Q1 = { periodStart: '2026-01-01T00:00:00Z', periodEnd: '2026-04-01T00:00:00Z' }
const EVENT_KEYS = ['billing_period_id', 'call_record_id', 'id', 'metadata', 'metric', 'quantity', 'recorded_at', 'session_id', 'tenant_id', 'unit_price']
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/
const ISO_MS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/

// 002_pricing_seed.sql: tier, metric, unitPrice, includedQuantity, overagePrice.
const SEED: [string, string, number, number, number][] = [
  ['STARTER', 'call_minute', 0.015, 100, 0.018], ['STARTER', 'number_rental', 0.05, 0, 0.05],
  ['STARTER', 'recording_minute', 0.0025, 0, 0.003], ['STARTER', 'session_created', 0.005, 100, 0.006],
  ['STARTER', 'sms_received', 0.0079, 100, 0.0095], ['STARTER', 'sms_sent', 0.0079, 100, 0.0095],
  ['GROWTH', 'call_minute', 0.012, 1000, 0.014], ['GROWTH', 'number_rental', 0.04, 0, 0.04],
  ['GROWTH', 'recording_minute', 0.002, 500, 0.0025], ['GROWTH', 'session_created', 0.004, 1000, 0.005],
  ['GROWTH', 'sms_received', 0.007, 1000, 0.0085], ['GROWTH', 'sms_sent', 0.007, 1000, 0.0085],
  ['ENTERPRISE', 'call_minute', 0.01, 10000, 0.012], ['ENTERPRISE', 'number_rental', 0.033, 0, 0.033],
  ['ENTERPRISE', 'recording_minute', 0.0015, 5000, 0.002], ['ENTERPRISE', 'session_created', 0.003, 10000, 0.004],
  ['ENTERPRISE', 'sms_received', 0.006, 10000, 0.0072], ['ENTERPRISE', 'sms_sent', 0.006, 10000, 0.0072],
]

function qs(q: Record<string, string | number | undefined>): string {
  const parts = Object.entries(q).filter(([, v]) => v !== undefined).map(([k, v]) => `${k}=${encodeURIComponent(String(v))}`)
  return parts.length ? `?${parts.join('&')}` : ''
}

interface Event { id: string; metric: string; quantity: string; unit_price: string | null; recorded_at: string; session_id: string | null; call_record_id: string | null; billing_period_id: string; metadata: Record<string, unknown> }

t.test('billing', async t => {
  let now = Date.parse('2026-01-20T12:00:00.000Z')
  const api = await startTestService(t, { now: () => now })
  const pool = api.svc.db.pool

  const tokens = new Map<string, { token: string; at: number }>()
  async function tokenOf(acct: Account): Promise<string> {
    const have = tokens.get(acct.tenantId)
    if (have && now - have.at < 600_000) return have.token
    const r = await api.req('POST', '/v1/auth/token', { body: { apiKey: acct.apiKey, apiSecret: acct.apiSecret } })
    if (r.status !== 200) throw new Error(`token: ${r.status} ${r.text}`)
    tokens.set(acct.tenantId, { token: r.body.accessToken, at: now })
    return r.body.accessToken
  }
  let requests = 0
  async function get(acct: Account, path: string) {
    if (++requests % 40 === 0) now += 61_000 // stay under 100 requests a minute (contract 8.1)
    return api.req('GET', path, { token: await tokenOf(acct) })
  }
  const at = (iso: string) => { now = Date.parse(iso) }
  async function session(acct: Account, a: number, b: number) {
    const r = await api.req('POST', '/v1/sessions', { token: await tokenOf(acct), body: { agentPhone: api.phone(a), customerPhone: api.phone(b) } })
    if (r.status !== 201) throw new Error(`session: ${r.status} ${r.text}`)
    return r.body as { id: string; proxyNumber: string }
  }
  async function until(ok: () => Promise<boolean>) {
    for (let i = 0; i < 200; i++) {
      if (await ok()) return
      await new Promise(r => setTimeout(r, 10))
    }
    throw new Error('timed out waiting for a write')
  }

  // ---- the data -------------------------------------------------------------------------------
  const acct = await api.signup()
  const other = await api.signup()
  const big = await api.signup()
  // The unit price is the one in force for the tenant's tier when the event is recorded.
  await pool.query(sql.unsafe`UPDATE tenants SET tier = 'ENTERPRISE' WHERE id = ${big.tenantId}`)

  const s1 = await session(acct, 1, 2)
  at('2026-01-20T12:05:00.000Z')
  const xml = await (await api.driver.voice({ from: api.phone(1), to: s1.proxyNumber, callSid: 'CA-bill-1' })).text()
  const c1 = /callId=([0-9a-f-]{36})/.exec(xml)![1]!
  await api.driver.status({ callId: c1, callSid: 'CA-bill-1-leg', callStatus: 'in-progress' })
  await api.driver.dialStatus({ callId: c1, callSid: 'CA-bill-1', dialCallStatus: 'completed', dialCallDuration: 125 })
  await until(async () => (await pool.exists(sql.unsafe`SELECT 1 FROM billing_events WHERE call_record_id = ${c1}`)))
  at('2026-02-03T08:00:00.000Z')
  const s2 = await session(acct, 3, 4)
  at('2026-03-15T09:00:00.000Z')
  const s3 = await session(acct, 5, 6)
  at('2026-03-15T09:30:00.000Z')
  await session(other, 101, 102)
  at('2026-03-15T10:00:00.000Z')
  const sBig = await session(big, 201, 202)
  at('2026-03-20T00:00:00.000Z')

  let periods: { id: string; periodStart: string; periodEnd: string; status: string; createdAt: string; closedAt: string | null }[] = []

  t.test('periods: calendar months in UTC, opened on first use, newest first', async t => {
    const r = await get(acct, '/v1/billing/periods')
    t.equal(r.status, 200)
    t.same(r.body.pagination, { count: 3, after: null })
    periods = r.body.data
    t.same(periods.map(p => [p.periodStart, p.periodEnd, p.status]), [
      ['2026-03-01T00:00:00.000Z', '2026-04-01T00:00:00.000Z', 'ACTIVE'],
      ['2026-02-01T00:00:00.000Z', '2026-03-01T00:00:00.000Z', 'CLOSED'],
      ['2026-01-01T00:00:00.000Z', '2026-02-01T00:00:00.000Z', 'CLOSED'],
    ])
    for (const p of periods) {
      t.same(Object.keys(p).sort(), ['closedAt', 'createdAt', 'id', 'periodEnd', 'periodStart', 'status'])
      t.match(p, { id: UUID, createdAt: ISO_MS })
      if (p.status === 'ACTIVE') t.equal(p.closedAt, null)
      else t.match(p.closedAt, ISO_MS)
    }
  })

  t.test('periods: pages of `limit`, `after` = the id of the last period', async t => {
    const first = await get(acct, `/v1/billing/periods${qs({ limit: 2 })}`)
    t.same(first.body, { data: periods.slice(0, 2), pagination: { count: 2, after: periods[1]!.id } })
    const second = await get(acct, `/v1/billing/periods${qs({ limit: 2, after: first.body.pagination.after })}`)
    t.same(second.body, { data: periods.slice(2), pagination: { count: 1, after: null } })
    const walked: string[] = []
    let after: string | null | undefined
    do {
      const page = await get(acct, `/v1/billing/periods${qs({ limit: 1, after: after ?? undefined })}`)
      walked.push(...page.body.data.map((p: { id: string }) => p.id))
      after = page.body.pagination.after
    } while (after)
    t.same(walked, periods.map(p => p.id), 'limit=1 walks every period exactly once')
    t.equal((await get(acct, `/v1/billing/periods${qs({ limit: 24 })}`)).status, 200)
  })

  t.test('periods: each tenant sees only its own', async t => {
    const r = await get(other, '/v1/billing/periods')
    t.equal(r.body.data.length, 1)
    t.match(r.body.data[0], { periodStart: '2026-03-01T00:00:00.000Z', status: 'ACTIVE' })
    t.notOk(periods.some(p => p.id === r.body.data[0].id))
    const foreign = await get(other, `/v1/billing/periods${qs({ after: periods[2]!.id })}`)
    t.same(foreign.body, { data: [], pagination: { count: 0, after: null } }, "another tenant's period id walks nothing")
  })

  let events: Event[] = []

  t.test('events: raw snake_case rows with the unit price in force, oldest first', async t => {
    const r = await get(acct, `/v1/billing/events${qs(Q1)}`)
    t.equal(r.status, 200)
    t.same(Object.keys(r.body), ['events'], 'not envelope-paginated')
    events = r.body.events
    t.equal(events.length, 7)
    for (const e of events) {
      t.same(Object.keys(e).sort(), EVENT_KEYS)
      t.match(e, { id: UUID, tenant_id: acct.tenantId, recorded_at: ISO_MS })
    }
    t.same(events.map(e => e.recorded_at), [...events.map(e => e.recorded_at)].sort(), 'ordered by recorded_at')
    const [jan, feb, mar] = [periods[2]!.id, periods[1]!.id, periods[0]!.id]
    const byMetric = (list: Event[], m: string) => list.find(e => e.metric === m)!
    const jan20 = events.filter(e => e.recorded_at === '2026-01-20T12:00:00.000Z')
    t.same(jan20.map(e => e.metric).sort(), ['number_rental', 'session_created'])
    t.match(byMetric(jan20, 'session_created'), {
      tenant_id: acct.tenantId, billing_period_id: jan, metric: 'session_created', quantity: '1', unit_price: '0.005',
      recorded_at: '2026-01-20T12:00:00.000Z', session_id: s1.id, call_record_id: null, metadata: {},
    })
    t.match(byMetric(jan20, 'number_rental'), {
      billing_period_id: jan, quantity: '1', unit_price: '0.05', session_id: null, call_record_id: null, metadata: { proxyNumber: s1.proxyNumber },
    })
    t.match(events[2], {
      metric: 'call_minute', quantity: '3', unit_price: '0.015', recorded_at: '2026-01-20T12:05:00.000Z',
      session_id: s1.id, call_record_id: c1, billing_period_id: jan, metadata: {},
    }, 'ceil(125 s / 60) = 3 minutes at the STARTER price')
    t.same(events.slice(3).map(e => [e.recorded_at.slice(0, 10), e.billing_period_id, e.metric, String(e.session_id)].join(' ')).sort(), [
      `2026-02-03 ${feb} number_rental null`, `2026-02-03 ${feb} session_created ${s2.id}`,
      `2026-03-15 ${mar} number_rental null`, `2026-03-15 ${mar} session_created ${s3.id}`,
    ].sort())
  })

  t.test('events: the tier decides the unit price', async t => {
    const r = await get(big, `/v1/billing/events${qs(Q1)}`)
    t.same(r.body.events.map((e: Event) => [e.metric, e.quantity, e.unit_price, e.session_id]).sort(), [
      ['number_rental', '1', '0.033', null], ['session_created', '1', '0.003', sBig.id],
    ])
  })

  t.test('events: metric filter, offset paging, period bounds', async t => {
    const calls = await get(acct, `/v1/billing/events${qs({ ...Q1, metric: 'call_minute' })}`)
    t.same(calls.body.events, [events[2]])
    const rentals = await get(acct, `/v1/billing/events${qs({ ...Q1, metric: 'number_rental' })}`)
    t.same(rentals.body.events, events.filter(e => e.metric === 'number_rental'))
    t.same((await get(acct, `/v1/billing/events${qs({ ...Q1, metric: 'sms_sent' })}`)).body, { events: [] })

    const pages: Event[] = []
    for (let offset = 0; offset <= events.length; offset += 3) {
      const page = await get(acct, `/v1/billing/events${qs({ ...Q1, limit: 3, offset })}`)
      t.ok(page.body.events.length <= 3)
      pages.push(...page.body.events)
    }
    t.same(pages, events, 'limit + offset pages walk every event once')
    t.same((await get(acct, `/v1/billing/events${qs({ ...Q1, offset: 7 })}`)).body, { events: [] })
    t.equal((await get(acct, `/v1/billing/events${qs({ ...Q1, limit: 500 })}`)).body.events.length, 7)

    // start inclusive, end exclusive; any offset
    const window = await get(acct, `/v1/billing/events${qs({ periodStart: '2026-01-20T13:05:00+01:00', periodEnd: '2026-02-03T08:00:00.000Z' })}`)
    t.same(window.body.events, [events[2]])
    const foreign = await get(other, `/v1/billing/events${qs(Q1)}`)
    t.ok(foreign.body.events.length > 0)
    t.notOk(foreign.body.events.some((e: Event) => events.some(mine => mine.id === e.id)), 'no event of another tenant')
    t.ok(foreign.body.events.every((e: Event) => e.session_id === null || e.session_id !== s1.id))
  })

  t.test('usage: the same report as GET /v1/analytics/usage', async t => {
    const billing = await get(acct, `/v1/billing/usage${qs(Q1)}`)
    t.equal(billing.status, 200)
    t.same(billing.body, {
      tenantId: acct.tenantId, periodStart: '2026-01-01T00:00:00.000Z', periodEnd: '2026-04-01T00:00:00.000Z',
      metrics: { session_created: 3, call_minute: 3, sms_sent: 0, sms_received: 0, recording_minute: 0, number_rental: 3 },
      totalEvents: 7,
    })
    t.same((await get(acct, `/v1/analytics/usage${qs(Q1)}`)).body, billing.body)
    const feb = await get(acct, `/v1/billing/usage${qs({ periodStart: periods[1]!.periodStart, periodEnd: periods[1]!.periodEnd })}`)
    t.match(feb.body, { metrics: { session_created: 1, call_minute: 0, number_rental: 1 }, totalEvents: 2 })
  })

  t.test('pricing: the current row of every tier and metric, numeric prices', async t => {
    const r = await get(acct, '/v1/billing/pricing')
    t.equal(r.status, 200)
    t.same(Object.keys(r.body), ['tiers'])
    const rows = r.body.tiers as Record<string, unknown>[]
    t.equal(rows.length, 18)
    t.same(rows.map(p => [p.tier, p.metric, p.unitPrice, p.includedQuantity, p.overagePrice]), SEED)
    for (const p of rows) {
      t.same(Object.keys(p).sort(), ['currency', 'effectiveFrom', 'effectiveUntil', 'id', 'includedQuantity', 'metric', 'overagePrice', 'tier', 'unitPrice'])
      t.match(p, { id: UUID, currency: 'USD', effectiveFrom: '2025-01-01T00:00:00.000Z', effectiveUntil: null })
      t.equal(typeof p.unitPrice, 'number')
    }
    t.same((await get(other, '/v1/billing/pricing')).body, r.body, 'the same list for every tenant')
  })

  async function expectValidation(t: Test, path: string, errors: { field: string; issue: string }[]) {
    const r = await get(acct, path)
    t.equal(r.status, 400, path)
    t.match(r.headers.get('content-type'), /^application\/problem\+json/)
    t.match(r.body, { type: /\/errors\/validation$/, title: 'Request validation failed', status: 400, detail: String, instance: /^urn:maskline:err:/ })
    t.same(r.body.errors, errors, path)
  }

  t.test('usage and events need a valid, non-empty period', async t => {
    for (const path of ['/v1/billing/usage', '/v1/billing/events']) {
      await expectValidation(t, path, [{ field: 'periodStart', issue: 'required' }, { field: 'periodEnd', issue: 'required' }])
      await expectValidation(t, `${path}${qs({ periodEnd: Q1.periodEnd })}`, [{ field: 'periodStart', issue: 'required' }])
      await expectValidation(t, `${path}${qs({ periodStart: '2026-01-01', periodEnd: Q1.periodEnd })}`, [{ field: 'periodStart', issue: 'invalid_format' }])
      await expectValidation(t, `${path}${qs({ periodStart: Q1.periodStart, periodEnd: '2026-04-01T00:00:00' })}`, [{ field: 'periodEnd', issue: 'invalid_format' }])
      await expectValidation(t, `${path}${qs({ periodStart: Q1.periodStart, periodEnd: Q1.periodStart })}`, [{ field: 'periodEnd', issue: 'not_after_period_start' }])
      await expectValidation(t, `${path}${qs({ periodStart: Q1.periodEnd, periodEnd: Q1.periodStart })}`, [{ field: 'periodEnd', issue: 'not_after_period_start' }])
    }
  })

  t.test('events: metric, limit and offset are checked', async t => {
    const e = (q: Record<string, string | number>) => `/v1/billing/events${qs({ ...Q1, ...q })}`
    await expectValidation(t, e({ metric: 'call_seconds' }), [{ field: 'metric', issue: 'invalid_value' }])
    await expectValidation(t, e({ metric: 'CALL_MINUTE' }), [{ field: 'metric', issue: 'invalid_value' }])
    await expectValidation(t, e({ limit: 0 }), [{ field: 'limit', issue: 'out_of_range' }])
    await expectValidation(t, e({ limit: 501 }), [{ field: 'limit', issue: 'out_of_range' }])
    await expectValidation(t, e({ limit: 'ten' }), [{ field: 'limit', issue: 'invalid_type' }])
    await expectValidation(t, e({ offset: -1 }), [{ field: 'offset', issue: 'out_of_range' }])
    await expectValidation(t, e({ offset: 1.5 }), [{ field: 'offset', issue: 'invalid_type' }])
    await expectValidation(t, e({ offset: 2 ** 31 }), [{ field: 'offset', issue: 'out_of_range' }])
  })

  t.test('periods: limit and after are checked', async t => {
    await expectValidation(t, `/v1/billing/periods${qs({ limit: 0 })}`, [{ field: 'limit', issue: 'out_of_range' }])
    await expectValidation(t, `/v1/billing/periods${qs({ limit: 25 })}`, [{ field: 'limit', issue: 'out_of_range' }])
    await expectValidation(t, `/v1/billing/periods${qs({ limit: 'all' })}`, [{ field: 'limit', issue: 'invalid_type' }])
    await expectValidation(t, `/v1/billing/periods${qs({ after: 'last' })}`, [{ field: 'after', issue: 'invalid_format' }])
    await expectValidation(t, `/v1/billing/periods${qs({ after: '2026-03-01T00:00:00Z' })}`, [{ field: 'after', issue: 'invalid_format' }])
  })

  t.test('tenant token only: 401 without one, 403 with a dashboard token', async t => {
    const login = await api.req('POST', '/v1/auth/dashboard/login', { body: { email: acct.email, password: acct.password } })
    t.equal(login.status, 200)
    for (const path of [`/v1/billing/usage${qs(Q1)}`, `/v1/billing/events${qs(Q1)}`, '/v1/billing/periods', '/v1/billing/pricing']) {
      const anon = await api.req('GET', path)
      t.equal(anon.status, 401, path)
      t.match(anon.body, { type: /\/errors\/unauthorized$/, status: 401 })
      const bad = await api.req('GET', path, { token: 'not.a.jwt' })
      t.equal(bad.status, 401, path)
      const user = await api.req('GET', path, { token: login.body.accessToken })
      t.equal(user.status, 403, path)
      t.match(user.body, { type: /\/errors\/forbidden$/, status: 403 })
    }
  })

  t.test('429 past the tier ceiling, with the limit headers', async t => {
    now += 120_000
    const token = await tokenOf(other)
    for (let i = 0; i < 100; i++) {
      const r = await api.req('GET', i % 2 ? '/v1/billing/pricing' : `/v1/billing/usage${qs(Q1)}`, { token })
      if (r.status !== 200) return t.fail(`request ${i + 1} got ${r.status}`)
    }
    const over = await api.req('GET', `/v1/billing/events${qs(Q1)}`, { token })
    t.equal(over.status, 429)
    t.match(over.body, { type: /\/errors\/rate-limit$/, status: 429 })
    t.equal(over.headers.get('x-ratelimit-limit'), '100')
    t.equal(over.headers.get('x-ratelimit-remaining'), '0')
    t.equal(over.headers.get('x-ratelimit-policy'), 'sliding-window-60s')
    t.match(over.headers.get('retry-after'), /^\d+$/)
  })
})
