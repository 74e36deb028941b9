// GET /v1/stream (contract D6) on a real uWS app, port 0, with real tenant and user JWTs.
import t, { type Test } from 'tap'
import uWS from 'uWebSockets.js'
import { buildEnvelope, type EventType } from '../../sql/vocabulary/event-envelope.js'
import { uuidv7 } from '../../sql/vocabulary/ids.js'
import { issueToken } from '../../api/auth/tokens.js'
import { registerStream, type Stream, type StreamOptions } from '../../gateway/stream/stream.js'
import { streamTokenVerifier } from '../../gateway/stream/auth.js'
import { createAuthenticator } from '../../api/auth/authenticate.js'
import { fixedDirectory } from '../support/auth-directory.js'
import { connectWs, encodeFrame, type HandshakeRefused, type WsClient } from '../support/ws-client.js'

const silent = { debug() {}, info() {}, warn() {}, error() {} }
const jwtSecret = new TextEncoder().encode('stream-test-secret-that-is-32-bytes-long!')

async function startApp(t: Test, opts: { maxBackpressure?: number; suspended?: Set<string>; log?: StreamOptions['log']; selfUrl?: () => string | null; settleMs?: number } = {}) {
  const app = uWS.App()
  let port: number | null = null
  const stream: Stream = registerStream(app, {
    selfUrl: opts.selfUrl ?? (() => (port === null ? null : `http://127.0.0.1:${port}`)),
    verifyTenantToken: streamTokenVerifier(createAuthenticator({
      jwtSecret, now: Date.now,
      directory: fixedDirectory(id => ({ id, status: opts.suspended?.has(id) ? 'SUSPENDED' : 'ACTIVE', tier: 'STARTER', salt: Buffer.alloc(32) })),
    })),
    log: opts.log ?? silent,
    publicBaseUrl: () => 'http://maskline.test',
    ...(opts.maxBackpressure ? { maxBackpressure: opts.maxBackpressure } : {}),
    ...(opts.settleMs !== undefined ? { settleMs: opts.settleMs } : {}),
  })
  const listen = await new Promise<uWS.us_listen_socket>((resolve, reject) =>
    app.listen('127.0.0.1', 0, s => (s ? resolve(s) : reject(new Error('listen failed')))))
  port = uWS.us_socket_local_port(listen)
  const clients: WsClient[] = []
  t.teardown(() => {
    for (const c of clients) c.socket.destroy()
    stream.closeAll()
    uWS.us_listen_socket_close(listen)
  })
  const url = (query = '') => `http://127.0.0.1:${port}/v1/stream${query}`
  return {
    app, stream, url,
    async connect(o: Parameters<typeof connectWs>[1] & { query?: string } = {}) {
      const c = await connectWs(url(o.query), o)
      clients.push(c)
      return c
    },
  }
}

const tenantToken = (tenantId: string, ttlSeconds?: number) =>
  issueToken(jwtSecret, { typ: 'tenant', sub: 'key', tenantId, tier: 'STARTER', scopes: ['api'] }, Date.now(), ttlSeconds)
const userToken = (tenantId: string, role: 'OWNER' | 'ADMIN' | 'OPERATOR' = 'OWNER') =>
  issueToken(jwtSecret, { typ: 'user', sub: uuidv7(), tenantId, tier: 'STARTER', role }, Date.now())
const bearer = (token: string) => ({ headers: { authorization: `Bearer ${token}` } })

function event(tenantId: string, type: EventType = 'session.created', n = 0) {
  return buildEnvelope(uuidv7(), type, Date.now(), {
    sessionId: uuidv7(), tenantId, proxyNumber: '+12025550100', state: 'ACTIVE', durationSeconds: n,
  })
}

async function refusal(p: Promise<unknown>): Promise<HandshakeRefused> {
  try { await p } catch (err) { return err as HandshakeRefused }
  throw new Error('handshake was accepted')
}

t.test('each tenant receives its own events and nobody else\'s', async t => {
  const s = await startApp(t)
  const a = uuidv7(), b = uuidv7()
  const ca1 = await s.connect(bearer(await tenantToken(a)))
  const ca2 = await s.connect(bearer(await tenantToken(a)))
  const cb = await s.connect(bearer(await tenantToken(b)))
  t.equal(s.stream.connectionCount(), 3)
  const ea = [event(a, 'session.created'), event(a, 'call.incoming'), event(a, 'session.target_swapped')]
  const eb = [event(b, 'sms.received')]
  for (const e of [...ea, ...eb]) s.stream.publishEvent(e)
  s.stream.publishEvent(event(uuidv7())) // a tenant with no sockets: nothing to do
  await Promise.all([ca1.waitForMessages(3), ca2.waitForMessages(3), cb.waitForMessages(1)])
  await new Promise(r => setTimeout(r, 50))
  t.same(ca1.messages.map(m => JSON.parse(m)), ea, 'envelopes arrive whole and in order')
  t.same(ca2.messages.map(m => JSON.parse(m)), ea)
  t.same(cb.messages.map(m => JSON.parse(m)), eb)
  t.equal(ca1.protocol, null, 'no subprotocol answered when none was offered')
})

t.test('?types= filters, session.target_swapped included; unknown types are refused', async t => {
  const s = await startApp(t)
  const a = uuidv7()
  const token = await tenantToken(a)
  const filtered = await s.connect({ ...bearer(token), query: '?types=call.ended,session.target_swapped' })
  const all = await s.connect(bearer(token))
  const sent = [event(a, 'session.created'), event(a, 'call.ended'), event(a, 'session.target_swapped'), event(a, 'sms.sent')]
  for (const e of sent) s.stream.publishEvent(e)
  await all.waitForMessages(4)
  await filtered.waitForMessages(2)
  await new Promise(r => setTimeout(r, 50))
  t.same(filtered.messages.map(m => JSON.parse(m).type), ['call.ended', 'session.target_swapped'])
  t.equal(all.messages.length, 4, 'an unfiltered socket gets each event once')
  const bad = await refusal(s.connect({ ...bearer(token), query: '?types=call.ended,nope' }))
  t.equal(bad.status, 400)
  t.match(JSON.parse(bad.body), { type: 'http://maskline.test/errors/validation', status: 400, errors: [{ field: 'types' }] })
})

t.test('handshakes without a valid tenant token are refused before the upgrade', async t => {
  const s = await startApp(t)
  const a = uuidv7()
  const none = await refusal(s.connect())
  t.equal(none.status, 401)
  t.equal(none.headers['www-authenticate'], 'Bearer')
  t.match(none.headers['content-type'], /^application\/problem\+json/)
  t.match(JSON.parse(none.body), { type: 'http://maskline.test/errors/unauthorized', status: 401, instance: /^urn:maskline:err:/ })
  t.equal((await refusal(s.connect(bearer('not.a.jwt')))).status, 401)
  t.equal((await refusal(s.connect({ headers: { authorization: `Basic ${Buffer.from('a:b').toString('base64')}` } }))).status, 401)
  const good = await tenantToken(a)
  t.equal((await refusal(s.connect(bearer(good.slice(0, -2) + 'xx')))).status, 401, 'bad signature')
  // never in the URL: a token in the query string does not authenticate
  t.equal((await refusal(s.connect({ query: `?access_token=${good}` }))).status, 401)
  t.equal((await refusal(s.connect({ query: `?token=${good}` }))).status, 401)
  t.equal(s.stream.connectionCount(), 0)
})

t.test('dashboard user tokens of every role stream their own tenant\'s events (contract D6)', async t => {
  const s = await startApp(t)
  const a = uuidv7(), b = uuidv7()
  const roles = ['OWNER', 'ADMIN', 'OPERATOR'] as const
  // the console's way: the subprotocol pair, answered with bearer
  const users = await Promise.all(roles.map(async role => s.connect({ protocols: ['bearer', await userToken(a, role)] })))
  for (const c of users) t.equal(c.protocol, 'bearer')
  const header = await s.connect(bearer(await userToken(a)))
  const other = await s.connect(bearer(await userToken(b)))
  const ea = event(a, 'call.ended'), eb = event(b, 'call.ended')
  s.stream.publishEvent(eb)
  s.stream.publishEvent(ea)
  await Promise.all([...users, header].map(c => c.waitForMessages(1)))
  await other.waitForMessages(1)
  await new Promise(r => setTimeout(r, 50))
  for (const c of [...users, header]) t.same(c.messages.map(m => JSON.parse(m)), [ea], 'only its own tenant\'s event')
  t.same(other.messages.map(m => JSON.parse(m)), [eb])
  const suspended = await startApp(t, { suspended: new Set([a]) })
  const refused = await refusal(suspended.connect({ protocols: ['bearer', await userToken(a)] }))
  t.equal(refused.status, 403, 'a suspended tenant\'s user is forbidden')
  t.match(JSON.parse(refused.body), { type: 'http://maskline.test/errors/forbidden', status: 403 })
})

t.test('a suspended tenant\'s token is forbidden', async t => {
  const a = uuidv7()
  const s = await startApp(t, { suspended: new Set([a]) })
  t.equal((await refusal(s.connect(bearer(await tenantToken(a))))).status, 403)
})

t.test('the token in the subprotocol pair works and the server answers bearer', async t => {
  const s = await startApp(t)
  const a = uuidv7()
  const c = await s.connect({ protocols: ['bearer', await tenantToken(a)] })
  t.equal(c.protocol, 'bearer')
  const e = event(a)
  s.stream.publishEvent(e)
  await c.waitForMessages(1)
  t.same(JSON.parse(c.messages[0]!), e)
  // header token plus an offered bearer protocol: still answer bearer (browsers require an answer)
  const c2 = await s.connect({ ...bearer(await tenantToken(a)), protocols: ['bearer'] })
  t.equal(c2.protocol, 'bearer')
  t.equal((await refusal(s.connect({ protocols: ['bearer'] }))).status, 401, 'bearer without a token')
})

t.test('the stream closes when the token expires', async t => {
  const s = await startApp(t)
  const c = await s.connect(bearer(await tenantToken(uuidv7(), 1)))
  const code = await Promise.race([c.closed, new Promise(r => setTimeout(() => r('still open'), 4_000))])
  t.equal(code, 1008)
})

t.test('a stalled reader is dropped at the backpressure limit; the others keep up', async t => {
  const s = await startApp(t, { settleMs: 0 }) // default limit: 1 MiB; each event out as it comes
  const a = uuidv7()
  const token = await tenantToken(a)
  const stalled = await s.connect({ ...bearer(token), keepMessages: false })
  const healthy = await s.connect({ ...bearer(token), keepMessages: false })
  let healthyCount = 0
  healthy.onMessage = () => { healthyCount++ }
  stalled.socket.pause() // stops reading: the kernel buffers fill, then uWS buffers, then the limit
  let published = 0
  let stalledClosedAfter = -1
  const started = Date.now()
  for (let batch = 0; batch < 400 && stalledClosedAfter < 0; batch++) {
    for (let i = 0; i < 500; i++) { s.stream.publishEvent(event(a, 'sms.received')); published++ } // each its own id: an id is sent once
    await new Promise(r => setImmediate(r))
    if (s.stream.connectionCount() < 2) stalledClosedAfter = published
  }
  t.ok(stalledClosedAfter > 0, `the stalled socket was closed (after ${stalledClosedAfter} events)`)
  // the healthy reader got every event, including those published while the other one stalled
  const deadline = Date.now() + 10_000
  while (healthyCount < published && Date.now() < deadline) await new Promise(r => setTimeout(r, 10))
  t.equal(healthyCount, published, `healthy socket received all ${published} events in ${Date.now() - started} ms`)
  t.equal(s.stream.connectionCount(), 1, 'the healthy socket is still connected')
  s.stream.publishEvent(event(a, 'call.ended'))
  while (healthyCount < published + 1 && Date.now() < deadline) await new Promise(r => setTimeout(r, 10))
  t.equal(healthyCount, published + 1)
  stalled.socket.resume()
  const code = await Promise.race([stalled.closed, new Promise(r => setTimeout(() => r('open'), 3_000))])
  t.not(code, 'open', 'the stalled client sees its connection closed')
})

// contract D6: the server pings every 30 s. The interval comes from the stream's uWS config
// (idleTimeout 46 s with sendPingsAutomatically: a ping after 30 s of silence, the socket closed
// 16 s later without a pong), a constant registerStream does not take as an option, so this test
// waits for the real ping (uWS timers tick every 4 s: it comes at about 32 s).
t.test('an idle client receives a ping frame about 30 s after it connected, and stays open', async t => {
  const s = await startApp(t)
  const a = uuidv7()
  const c = await s.connect(bearer(await tenantToken(a)))
  const connectedAt = Date.now()
  while (c.pingsReceived === 0 && Date.now() - connectedAt < 40_000) await new Promise(r => setTimeout(r, 50))
  const after = (Date.now() - connectedAt) / 1000
  t.equal(c.pingsReceived, 1, `one ping frame (opcode 0x9) received, after ${after.toFixed(1)} s`)
  t.ok(after >= 24 && after <= 40, `the ping came at the 30 s interval (24–40 s with uWS's 4 s timer ticks): ${after.toFixed(1)} s`)
  // The client answered with a pong (ws-client does): the socket is still served.
  const e = event(a, 'call.ended')
  s.stream.publishEvent(e)
  await c.waitForMessages(1)
  t.same(JSON.parse(c.messages[0]!), e, 'events still arrive after the ping')
  t.equal(s.stream.connectionCount(), 1)
})

t.test('a socket uWS drops without a close frame right after opening is logged with uWS\'s reason', async t => {
  const warned: Array<{ fields: Record<string, unknown>; msg: string }> = []
  const s = await startApp(t, { log: { ...silent, warn: ((fields: Record<string, unknown>, msg: string) => { warned.push({ fields, msg }) }) as StreamOptions['log']['warn'] } })
  const tenant = uuidv7()
  const quiet = await s.connect(bearer(await tenantToken(tenant)))
  const c = await s.connect(bearer(await tenantToken(tenant)))
  c.socket.write(encodeFrame(0x1, Buffer.alloc(4096, 0x61))) // over maxPayloadLength (1,024): uWS drops it
  t.equal(await c.closed, 1006, 'dropped without a close frame')
  quiet.close()
  t.equal(await quiet.closed, 1000, 'a socket closed normally is not')
  t.equal(warned.length, 1)
  const w = warned[0]!
  t.equal(w.fields.code, 'stream-early-close')
  t.equal(w.fields.closeCode, 1006)
  t.match(w.fields.reason, /\S/, 'uWS says why')
  t.equal(w.fields.tenantId, tenant)
  t.type(w.fields.livedMs, 'number')
  t.ok((w.fields.livedMs as number) < 1_000)
})

// uWS 20.30 can drop a socket it has just upgraded inside res.cork() from a promise (gateway/stream/
// deferred-upgrades.ts): a handshake decided after an await is upgraded from the drain request
// instead, and one decided at once (the token cached) in uWS's own upgrade callback.
t.test('a handshake decided after an await is upgraded through the drain request; a cached token at once', async t => {
  const s = await startApp(t)
  const tenant = uuidv7()
  const token = await tenantToken(tenant)
  const first = await s.connect(bearer(token)) // a token this authenticator has not seen: jose, a promise
  t.equal(s.stream.deferredUpgrades(), 1, 'the first handshake waited for the drain request')
  const again = await s.connect(bearer(token)) // now cached: decided synchronously
  t.equal(s.stream.deferredUpgrades(), 1, 'the second was upgraded in its own callback')
  const e = event(tenant)
  s.stream.publishEvent(e)
  await Promise.all([first.waitForMessages(1), again.waitForMessages(1)])
  t.same([first, again].map(c => JSON.parse(c.messages[0]!)), [e, e], 'both sockets carry the tenant\'s events')
  t.equal((await refusal(s.connect(bearer(token.slice(0, -2) + 'xx')))).status, 401, 'a refusal after an await is answered from the promise')
  t.equal(s.stream.deferredUpgrades(), 1)
})

t.test('handshakes decided after an await, many at once, are all upgraded and stay open', async t => {
  const s = await startApp(t)
  const tenant = uuidv7()
  const clients: WsClient[] = []
  for (let round = 0; round < 10; round++) {
    const tokens = await Promise.all(Array.from({ length: 20 }, () => tenantToken(tenant)))
    clients.push(...await Promise.all(tokens.map(tk => s.connect(bearer(tk)))))
  }
  t.equal(s.stream.deferredUpgrades(), 200, 'every one of them through the drain request')
  const e = event(tenant)
  s.stream.publishEvent(e)
  await Promise.all(clients.map(c => c.waitForMessages(1)))
  await new Promise(r => setTimeout(r, 200))
  t.equal(clients.filter(c => c.socket.destroyed || c.socket.readableEnded).length, 0, 'none was dropped')
  t.equal(s.stream.connectionCount(), 200)
})

t.test('a handshake that waited is answered 503 with Retry-After when the node cannot reach itself', async t => {
  const s = await startApp(t, { selfUrl: () => null }) // as while the listener is closing
  const tenant = uuidv7()
  const refused = await refusal(s.connect(bearer(await tenantToken(tenant))))
  t.equal(refused.status, 503)
  t.equal(refused.headers['retry-after'], '1')
  t.match(refused.headers['content-type'], /^application\/problem\+json/)
  t.match(JSON.parse(refused.body), { type: 'http://maskline.test/errors/unavailable', status: 503 })
  t.equal(s.stream.connectionCount(), 0)
  t.equal(s.stream.deferredUpgrades(), 0)
})
