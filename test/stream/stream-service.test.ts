// GET /v1/stream end to end through the whole service (gateway/service.ts, port 0; real Postgres
// and Redis in 'services' mode, PGlite and the in-process bus in 'embedded' mode): a tenant's SDK
// client sees the envelopes of real actions (session create, target swap, a routed voice
// callback) in per-session order, another tenant sees none of them, and no message carries a
// real phone number. Across two nodes (services mode only, two child processes sharing
// DATABASE_URL and REDIS_URL): a swap done through node A reaches a client connected to node B.
import t, { type Test } from 'tap'
import { startTestService, type TestService } from '../support/service.js'
import { childData, linesWithPhoneNumbers, request, signupChild, startChild } from '../support/child-service.js'
import { connectWs, type WsClient } from '../support/ws-client.js'
import type { EventEnvelope } from '../../sql/vocabulary/event-envelope.js'

const SESSION_FLOW = ['session.created', 'session.activated', 'session.target_swapped', 'call.incoming'] as const

/** A stream client on `baseUrl` (http://host:port) with a tenant token, closed at teardown. */
async function streamClient(t: Test, baseUrl: string, token: string): Promise<WsClient> {
  const c = await connectWs(`${baseUrl}/v1/stream`, { headers: { authorization: `Bearer ${token}` } })
  t.teardown(() => { c.socket.destroy() })
  return c
}

const envelopes = (c: WsClient): EventEnvelope[] => c.messages.map(m => JSON.parse(m) as EventEnvelope)

/** Every `+digits` in the messages is one of the proxy numbers, and no party number appears at all. */
function checkNoPartyNumbers(t: Test, messages: readonly string[], proxies: ReadonlySet<string>, parties: readonly string[]) {
  const foreign = messages.flatMap(m => (m.match(/\+\d{6,}/g) ?? []).filter(n => !proxies.has(n)))
  t.same(foreign, [], 'the only numbers on the stream are proxy numbers')
  t.same(messages.filter(m => parties.some(p => m.includes(p))), [], 'no party number in any message')
}

t.test('a tenant\'s stream carries its real events in per-session order, and only to that tenant', async t => {
  const api: TestService = await startTestService(t)
  const [acct, other] = await Promise.all([api.signup(), api.signup()])
  const mine = await streamClient(t, api.url, acct.token)
  const theirs = await streamClient(t, api.url, other.token)
  const A1 = api.phone(1), B1 = api.phone(2), C1 = api.phone(3)
  const A2 = api.phone(4), B2 = api.phone(5), C2 = api.phone(6)

  // Back to back, no waiting on the stream in between: the order below is the service's own.
  const create = (agentPhone: string, customerPhone: string) =>
    api.req('POST', '/v1/sessions', { token: acct.token, body: { agentPhone, customerPhone } })
  const r1 = await create(A1, B1)
  const r2 = await create(A2, B2)
  t.equal(r1.status, 201)
  t.equal(r2.status, 201)
  const s1 = r1.body, s2 = r2.body
  t.equal((await api.req('PATCH', `/v1/sessions/${s1.id}/target`, { token: acct.token, body: { customerPhone: C1 } })).status, 200)
  t.equal((await api.req('PATCH', `/v1/sessions/${s2.id}/target`, { token: acct.token, body: { customerPhone: C2 } })).status, 200)
  // Routed voice callbacks (sandbox provider, signature none): the new customers reach their agents.
  const v1 = await api.driver.voice({ from: C1, to: s1.proxyNumber, callSid: 'stream-e2e-1' })
  t.match(await v1.text(), new RegExp(`<Number[^>]*>\\${A1}</Number>`), 'the voice callback routed (C1 → A1)')
  const v2 = await api.driver.voice({ from: A2, to: s2.proxyNumber, callSid: 'stream-e2e-2' })
  t.match(await v2.text(), new RegExp(`<Number[^>]*>\\${C2}</Number>`), 'the voice callback routed (A2 → C2)')

  await mine.waitForMessages(2 * SESSION_FLOW.length, 10_000)
  const got = envelopes(mine)
  for (const s of [s1, s2]) {
    const own = got.filter(e => e.data.sessionId === s.id)
    t.same(own.map(e => e.type), SESSION_FLOW, `session ${s === s1 ? 1 : 2}: created, activated, target_swapped, call.incoming, in that order`)
    for (const e of own) {
      t.match(e, { id: /^[0-9a-f-]{36}$/, createdAt: /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/, data: { sessionId: s.id, tenantId: acct.tenantId, proxyNumber: s.proxyNumber } }, e.type)
    }
    const swapped = own.find(e => e.type === 'session.target_swapped')!
    t.same(Object.keys(swapped.data).sort(), ['proxyNumber', 'sessionId', 'state', 'tenantId', 'timestamp'], 'target_swapped data: exactly these keys')
    t.match(swapped.data, { state: 'ACTIVE', timestamp: /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/ })
    const incoming = own.find(e => e.type === 'call.incoming')!
    t.match(incoming.data, { callId: /^[0-9a-f-]{36}$/, direction: String, status: String })
  }
  t.equal(got.length, 2 * SESSION_FLOW.length, 'each event once, nothing else')
  t.equal(new Set(got.map(e => e.id)).size, got.length, 'distinct envelope ids')

  // The other tenant's socket works (its own session arrives) but got none of the events above,
  // which were all published before its own.
  const r3 = await api.req('POST', '/v1/sessions', { token: other.token, body: { agentPhone: api.phone(7), customerPhone: api.phone(8) } })
  t.equal(r3.status, 201)
  await theirs.waitForMessages(2, 10_000)
  await new Promise(r => setTimeout(r, 100))
  t.same(envelopes(theirs).map(e => [e.type, e.data.sessionId, e.data.tenantId]),
    [['session.created', r3.body.id, other.tenantId], ['session.activated', r3.body.id, other.tenantId]],
    'the second tenant receives only its own events')
  t.equal(mine.messages.length, 2 * SESSION_FLOW.length, 'and the first tenant none of the second\'s')

  checkNoPartyNumbers(t, [...mine.messages, ...theirs.messages],
    new Set([s1.proxyNumber, s2.proxyNumber, r3.body.proxyNumber]),
    [A1, B1, C1, A2, B2, C2, api.phone(7), api.phone(8)])
})

// Embedded mode is one node by design: PGlite is held by one process and the in-process bus
// delivers nothing to anyone, so there is no second node to reach.
const embedded = process.env.MASKLINE_TEST_BACKEND === 'embedded' || !process.env.TEST_DATABASE_URL
const singleNode = embedded && 'embedded mode (PGlite, in-process bus) is single-node by design: no second node to reach'

t.test('two nodes: a swap done through node A reaches a stream client on node B', { skip: singleNode }, async t => {
  // Real Postgres without Redis is a misconfigured services run, not a reason to skip.
  if (!process.env.TEST_REDIS_URL) throw new Error('services mode needs TEST_REDIS_URL: the nodes meet on the Redis bus')
  const data = await childData(t)
  const [a, b] = await Promise.all([startChild(t, data), startChild(t, data)])
  t.not(a.port, b.port)
  const acct = await signupChild(a.url)
  const onA = await streamClient(t, a.url, acct.token)
  const onB = await streamClient(t, b.url, acct.token) // the token of node A: same JWT_SECRET on every node
  const agent = '+14155551001', customer = '+14155551002', next = '+14155551003'
  const s = await request(a.url, 'POST', '/v1/sessions', { token: acct.token, body: { agentPhone: agent, customerPhone: customer } })
  t.equal(s.status, 201)
  const swap = await request(a.url, 'PATCH', `/v1/sessions/${s.body.id}/target`, { token: acct.token, body: { customerPhone: next } })
  t.equal(swap.status, 200)

  const want = ['session.created', 'session.activated', 'session.target_swapped']
  await onA.waitForMessages(3, 10_000)
  await onB.waitForMessages(3, 10_000)
  await new Promise(r => setTimeout(r, 200))
  const fromB = envelopes(onB)
  t.same(fromB.map(e => e.type), want, 'node B\'s client gets node A\'s events, once each, in order')
  t.same(fromB, envelopes(onA), 'the very envelopes node A\'s own client got')
  t.match(fromB[2]!.data, { sessionId: s.body.id, tenantId: acct.tenantId, proxyNumber: s.body.proxyNumber, state: 'ACTIVE', timestamp: String })
  checkNoPartyNumbers(t, [...onA.messages, ...onB.messages], new Set([s.body.proxyNumber]), [agent, customer, next])
  t.same(linesWithPhoneNumbers([...a.lines, ...b.lines]), [], 'no phone number in either node\'s log')
})
