// README.md, Operator console: the console's API (api/routes/console.ts). The tenant endpoints it mirrors under
// /v1/console take dashboard user tokens (and only those), keep the tenant scoping, and let OWNER
// and ADMIN act while OPERATOR reads; the two figures added for it (overview, session timeline).
import t from 'tap'
import { sql } from 'slonik'
import { hashPassword } from '../../api/auth/passwords.js'
import { uuidv7 } from '../../sql/vocabulary/ids.js'
import { eventually, startTestService, type TestService } from '../support/service.js'

async function userWithRole(api: TestService, tenantId: string, role: 'ADMIN' | 'OPERATOR'): Promise<string> {
  const email = `${role.toLowerCase()}-${uuidv7()}@example.test`
  const password = `${role}-correct-horse`
  api.secrets.add(password)
  await api.svc.db.pool.query(sql.unsafe`INSERT INTO users (id, tenant_id, email, password_hash, role)
    VALUES (${uuidv7()}, ${tenantId}, ${email}, ${await hashPassword(password)}, ${role})`)
  const r = await api.req('POST', '/v1/auth/dashboard/login', { body: { email, password } })
  api.secrets.add(r.body.accessToken)
  return r.body.accessToken
}

t.test('console endpoints', async t => {
  const api = await startTestService(t)
  const a = await api.signup()
  const b = await api.signup()
  const admin = await userWithRole(api, a.tenantId, 'ADMIN')
  const operator = await userWithRole(api, a.tenantId, 'OPERATOR')
  const A = api.phone(21), B = api.phone(22), B2 = api.phone(23)
  const s = (await api.req('POST', '/v1/sessions', { token: a.token, body: { agentPhone: A, customerPhone: B } })).body
  const other = (await api.req('POST', '/v1/sessions', { token: b.token, body: { agentPhone: api.phone(24), customerPhone: api.phone(25) } })).body

  await t.test('user tokens only, the tenant API unchanged (contract 5.3)', async t => {
    for (const token of [a.ownerToken, admin, operator]) {
      const list = await api.req('GET', '/v1/console/sessions', { token })
      t.equal(list.status, 200)
      t.same(list.body.data.map((x: { id: string }) => x.id), [s.id], 'its own tenant\'s sessions only')
    }
    const tenant = await api.req('GET', '/v1/console/sessions', { token: a.token })
    t.equal(tenant.status, 403, 'a tenant token is refused here')
    t.match(tenant.body, { type: /\/errors\/forbidden$/ })
    t.equal((await api.req('GET', '/v1/sessions', { token: a.ownerToken })).status, 403, 'and a user token still is on /v1/sessions')
    t.equal((await api.req('GET', '/v1/console/sessions')).status, 401)
    t.equal((await api.req('GET', `/v1/console/sessions/${other.id}`, { token: a.ownerToken })).status, 404, 'another tenant\'s session is not found')
    const foreign = await api.req('GET', `/v1/console/sessions/${other.id}/timeline`, { token: a.ownerToken })
    t.equal(foreign.status, 404, 'nor is its timeline')
    t.match(foreign.body, { type: /\/errors\/not-found$/, status: 404 })
    t.equal((await api.req('GET', `/v1/console/sessions/${uuidv7()}/timeline`, { token: a.ownerToken })).status, 404, 'an unknown session')
    t.equal((await api.req('GET', '/v1/console/sessions/nope/timeline', { token: a.ownerToken })).status, 400)
    t.equal((await api.req('POST', `/v1/console/sessions/${other.id}/end`, { token: a.ownerToken })).status, 404)
    t.equal((await api.req('GET', '/v1/console/sessions?state=NOPE', { token: a.ownerToken })).status, 400, 'validated as the original')
  })

  await t.test('OPERATOR reads, ADMIN acts', async t => {
    for (const [method, path, body] of [
      ['POST', `/v1/console/sessions/${s.id}/end`, undefined],
      ['PATCH', `/v1/console/sessions/${s.id}`, { gracePeriodMinutes: 30 }],
      ['PATCH', `/v1/console/sessions/${s.id}/target`, { customerPhone: B2 }],
      ['POST', '/v1/console/webhooks/test', undefined],
    ] as const) {
      const r = await api.req(method, path, { token: operator, ...(body ? { body } : {}) })
      t.equal(r.status, 403, `OPERATOR: ${method} ${path}`)
      t.match(r.body, { type: /\/errors\/forbidden$/, status: 403, detail: /OWNER or ADMIN/ })
    }
    t.equal((await api.req('GET', `/v1/console/sessions/${s.id}`, { token: operator })).body.state, 'ACTIVE', 'nothing changed')
    const grace = await api.req('PATCH', `/v1/console/sessions/${s.id}`, { token: admin, body: { gracePeriodMinutes: 30 } })
    t.equal(grace.status, 200)
    t.equal(grace.body.gracePeriodMinutes, 30)
    const swap = await api.req('PATCH', `/v1/console/sessions/${s.id}/target`, { token: admin, body: { customerPhone: B2 } })
    t.equal(swap.status, 200)
    t.notOk(JSON.stringify(swap.body).includes(B2), 'the swap answers no number')
  })

  await t.test('a session\'s timeline: created, activated, its swap; no number nor hash in it', async t => {
    const r = await api.req('GET', `/v1/console/sessions/${s.id}/timeline`, { token: operator })
    t.equal(r.status, 200)
    t.same(r.body.data.map((e: { kind: string }) => e.kind), ['created', 'activated', 'swap'], 'oldest first')
    t.equal(r.body.data[0].at, s.createdAt)
    t.equal(r.body.truncated, false)
    const text = JSON.stringify(r.body)
    for (const n of [A, B, B2]) t.notOk(text.includes(n), 'no party number')
    t.notMatch(text, /[0-9a-f]{64}/, 'no party hash')
  })

  await t.test('overview: live sessions by state, calls and SMS per minute', async t => {
    const before = (await api.req('GET', '/v1/console/overview', { token: operator })).body
    t.same(before.sessions, { PENDING: 0, ACTIVE: 1, GRACE_PERIOD: 0 })
    t.same(before.activity.minutes, [])
    await api.driver.voice({ from: B2, to: s.proxyNumber, callSid: 'v3:console-api-1' })
    await api.driver.smsReceived({ from: A, to: s.proxyNumber, text: 'hello', messageId: 'console-api-sms-1' })
    t.equal((await api.req('POST', `/v1/console/sessions/${s.id}/end`, { token: a.ownerToken })).status, 200, 'OWNER ends')
    const after = await eventually(async () => {
      const o = (await api.req('GET', '/v1/console/overview?minutes=5', { token: operator })).body
      const calls = o.activity.minutes.reduce((n: number, m: { calls: number }) => n + m.calls, 0)
      const sms = o.activity.minutes.reduce((n: number, m: { sms: number }) => n + m.sms, 0)
      return calls === 1 && sms === 1 ? o : undefined
    }, 'one call and one SMS in the overview')
    t.same(after.sessions, { PENDING: 0, ACTIVE: 0, GRACE_PERIOD: 1 })
    t.match(after.activity.minutes[0], { minute: /:00\.000Z$/ })
    t.ok(Date.parse(after.activity.from) <= Date.parse(after.activity.minutes[0].minute))
    const other = (await api.req('GET', '/v1/console/overview', { token: b.ownerToken })).body
    t.same(other.activity.minutes, [], 'another tenant sees none of it')
    t.equal((await api.req('GET', '/v1/console/overview?minutes=0', { token: operator })).status, 400)
  })

  await t.test('the timeline has the call with its outcome and duration, the SMS with its status, the end', async t => {
    const r = await eventually(async () => {
      const r = await api.req('GET', `/v1/console/sessions/${s.id}/timeline`, { token: operator })
      return r.body.data.some((e: { kind: string }) => e.kind === 'sms') ? r : undefined
    }, 'the SMS on the timeline')
    t.same(r.body.data.map((e: { kind: string }) => e.kind), ['created', 'activated', 'swap', 'call', 'sms', 'ended'])
    const [call, sms] = [r.body.data[3], r.body.data[4]]
    t.match(call, { kind: 'call', direction: 'B_TO_A', status: /^(RINGING|ANSWERED|COMPLETED|MISSED|FAILED)$/, durationSeconds: Number })
    t.same(Object.keys(call).sort(), ['at', 'direction', 'durationSeconds', 'id', 'kind', 'status'], 'the call: these fields only')
    t.match(sms, { kind: 'sms', direction: 'A_TO_B', status: /^(QUEUED|SENT|DELIVERED|FAILED)$/, reason: null })
    t.same(Object.keys(sms).sort(), ['at', 'direction', 'id', 'kind', 'reason', 'status'], 'the SMS: these fields only')
    const calls = (await api.req('GET', `/v1/console/sessions/${s.id}/calls`, { token: operator })).body.data
    t.same([call.id, call.status, call.durationSeconds, call.at], [calls[0].id, calls[0].status, calls[0].durationSeconds, calls[0].initiatedAt], 'as GET .../calls has it')
    const ended = (await api.req('GET', `/v1/console/sessions/${s.id}`, { token: operator })).body.endedAt
    t.equal(r.body.data[5].at, ended)
    const text = JSON.stringify(r.body)
    for (const n of [A, B, B2]) t.notOk(text.includes(n), 'no party number')
  })

  await t.test('the OpenAPI document lists the console endpoints with their roles', async t => {
    const doc = (await api.req('GET', '/v1/openapi.json')).body
    for (const p of ['/v1/console/overview', '/v1/console/sessions', '/v1/console/sessions/{id}/timeline', '/v1/console/sessions/{id}/end', '/v1/console/numbers/pool', '/v1/console/webhooks/logs']) {
      t.ok(doc.paths[p], `${p} is documented`)
    }
    t.match(doc.paths['/v1/console/sessions/{id}/end'].post.summary, /OWNER or ADMIN/)
  })
})
