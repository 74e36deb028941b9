// Tier quota (contract 8.2, 429 tier-session-limit), pool exhaustion (503 pool-exhausted) and the
// Idempotency-Key of POST /v1/sessions (contract D4).
import t from 'tap'
import { sql } from 'slonik'
import { startTestService } from '../support/service.js'

t.test('pool-exhausted when no proxy satisfies the overlap rule', async t => {
  const api = await startTestService(t, { env: { NUMBER_POOL: 'US:+12025550100' } })
  const acct = await api.signup()
  const A = api.phone(1)
  const first = await api.req('POST', '/v1/sessions', { token: acct.token, body: { agentPhone: A, customerPhone: api.phone(2) } })
  t.equal(first.status, 201)
  const second = await api.req('POST', '/v1/sessions', { token: acct.token, body: { agentPhone: A, customerPhone: api.phone(3) } })
  t.equal(second.status, 503)
  t.match(second.body, { type: /\/errors\/pool-exhausted$/, status: 503 })
  const pool = await api.req('GET', '/v1/numbers/pool', { token: acct.token })
  t.match(pool.body, { pools: [{ region: 'US', total: 1, available: 0, inUse: 1, cooldown: 0 }] })
})

t.test('STARTER tenants hold at most 100 live sessions', async t => {
  // 101 calls would also hit the 100/min request limit: a clock we move keeps the two apart.
  let offset = 0
  const api = await startTestService(t, { now: () => Date.now() + offset })
  const acct = await api.signup()
  const results = []
  for (let i = 0; i < 100; i++) {
    if (i === 90) offset += 61_000
    results.push((await api.req('POST', '/v1/sessions', { token: acct.token, body: { agentPhone: api.phone(1000 + i), customerPhone: api.phone(2000 + i) } })).status)
  }
  t.same(new Set(results), new Set([201]))
  const over = await api.req('POST', '/v1/sessions', { token: acct.token, body: { agentPhone: api.phone(3000), customerPhone: api.phone(3001) } })
  t.equal(over.status, 429)
  t.match(over.body, { type: /\/errors\/tier-session-limit$/, status: 429 })
})

t.test('Idempotency-Key replays the first answer and never creates twice', async t => {
  const api = await startTestService(t)
  const acct = await api.signup()
  const body = { agentPhone: api.phone(1), customerPhone: api.phone(2) }
  const a = await api.req('POST', '/v1/sessions', { token: acct.token, body, headers: { 'idempotency-key': 'k-1' } })
  const b = await api.req('POST', '/v1/sessions', { token: acct.token, body, headers: { 'idempotency-key': 'k-1' } })
  t.equal(a.status, 201)
  t.equal(b.status, 201)
  t.same(b.body, a.body)
  const n = await api.svc.db.pool.oneFirst(sql.unsafe`SELECT count(*)::int FROM sessions WHERE tenant_id = ${acct.tenantId}`)
  t.equal(n, 1)
  const billed = await api.svc.db.pool.oneFirst(sql.unsafe`SELECT count(*)::int FROM billing_events WHERE tenant_id = ${acct.tenantId} AND metric = 'session_created'`)
  t.equal(billed, 1, 'a retry never bills twice')
  const c = await api.req('POST', '/v1/sessions', { token: acct.token, body: { ...body, customerPhone: api.phone(3) }, headers: { 'idempotency-key': 'k-1' } })
  t.equal(c.status, 409)
  t.match(c.body, { type: /\/errors\/conflict$/ })
})
