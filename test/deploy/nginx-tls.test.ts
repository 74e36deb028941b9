// contract D1 (TLS), docs/configuration.md (Behind nginx): the shipped deploy/nginx/maskline.conf in front of the real
// service, through Debian's nginx with a certificate made at test time. TLS 1.2 is refused and
// TLS 1.3 serves the API; the WebSocket stream works through it; nginx's own refusals are problem
// documents; and with TRUSTED_PROXY set to nginx's address the per-address login throttle counts
// each client (distinct loopback source addresses, 127.0.0.2 and .3), while without it every
// client shares nginx's address: the control that shows the first result is not an accident.
import t, { type Test } from 'tap'
import https from 'node:https'
import net from 'node:net'
import tls from 'node:tls'
import { randomBytes } from 'node:crypto'
import type { IncomingHttpHeaders } from 'node:http'
import type { TLSSocket } from 'node:tls'
import { problems } from '../../api/problems.js'
import type { EventEnvelope } from '../../sql/vocabulary/event-envelope.js'
import { missing } from '../support/missing.js'
import { eventually, startTestService, type TestService } from '../support/service.js'
import { createFrameParser, encodeFrame } from '../support/ws-client.js'
import { findNginx, startNginx, type RunningNginx } from './nginx.js'
import { startRecordingRelay, type UpstreamRequest } from './recording-relay.js'

const NGINX = findNginx()
const skip = NGINX ? false : missing('an nginx binary (Debian: apt-get install nginx-light; .ci/run installs it)')

// Clients come from distinct loopback addresses (Linux routes all of 127/8 to lo); nginx itself
// reaches the service from 127.0.0.1, which is what TRUSTED_PROXY names.
const CLIENT_A = '127.0.0.2'
const CLIENT_B = '127.0.0.3'
const NGINX_PEER = '127.0.0.1'

interface Reply { status: number; headers: IncomingHttpHeaders; body: any; text: string; protocol: string | null }

/** One HTTPS request through nginx, on its own connection from `from`. */
function call(ng: RunningNginx, method: string, path: string, o: { from?: string; token?: string; body?: unknown; raw?: string; headers?: Record<string, string>; chunked?: boolean } = {}): Promise<Reply> {
  const headers: Record<string, string> = { ...o.headers }
  if (o.token) headers['authorization'] = `Bearer ${o.token}`
  const payload = o.body !== undefined ? JSON.stringify(o.body) : o.raw
  if (o.body !== undefined) headers['content-type'] ??= 'application/json'
  if (o.chunked) headers['transfer-encoding'] = 'chunked'
  return new Promise((resolve, reject) => {
    const req = https.request(`${ng.url}${path}`, { method, headers, ca: ng.ca, agent: false, localAddress: o.from ?? CLIENT_A }, res => {
      const chunks: Buffer[] = []
      res.on('data', c => chunks.push(c))
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString()
        let body: unknown = text
        try { body = text ? JSON.parse(text) : null } catch { /* not JSON */ }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body, text, protocol: (res.socket as TLSSocket).getProtocol?.() ?? null })
      })
    })
    req.on('error', reject)
    if (payload !== undefined && o.chunked) { req.write(payload.slice(0, 7)); req.write(payload.slice(7)) }
    else if (payload !== undefined) req.write(payload)
    req.end()
  })
}

/** A TLS handshake alone: the negotiated protocol, or the error it ended with. */
function handshake(ng: RunningNginx, opts: tls.ConnectionOptions): Promise<{ protocol: string | null } | { error: NodeJS.ErrnoException }> {
  return new Promise(resolve => {
    const tcp = net.connect({ host: '127.0.0.1', port: ng.port, localAddress: CLIENT_A })
    const s = tls.connect({ socket: tcp, ca: ng.ca, ...opts }, () => {
      resolve({ protocol: s.getProtocol() })
      s.destroy()
    })
    s.on('error', error => { tcp.destroy(); resolve({ error }) })
  })
}

interface Stream { protocol: string | null; messages: string[]; waitFor(n: number): Promise<void>; close(): void }

/** A WebSocket on /v1/stream through nginx (wss), with the tenant token as header or subprotocol. */
function openStream(t: Test, ng: RunningNginx, query: string, auth: { authorization: string } | { protocols: string }): Promise<Stream> {
  const headers: Record<string, string> = {
    connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': randomBytes(16).toString('base64'),
    ...('authorization' in auth ? { authorization: auth.authorization } : { 'sec-websocket-protocol': auth.protocols }),
  }
  return new Promise((resolve, reject) => {
    const req = https.request(`${ng.url}/v1/stream${query}`, { headers, ca: ng.ca, agent: false, localAddress: CLIENT_B })
    req.on('response', res => {
      let body = ''
      res.on('data', d => { body += d })
      res.on('end', () => reject(new Error(`no upgrade through nginx: ${res.statusCode} ${body}`)))
    })
    req.on('error', reject)
    req.on('upgrade', (res, socket, head) => {
      const messages: string[] = []
      const waiters: Array<() => void> = []
      const parse = createFrameParser((_fin, opcode, payload) => {
        if (opcode === 0x9) { socket.write(encodeFrame(0xa, payload)); return }
        if (opcode !== 0x1) return
        messages.push(payload.toString('utf8'))
        for (const w of waiters.splice(0)) w()
      })
      socket.on('data', parse)
      socket.on('error', () => {})
      if (head.length) parse(head)
      const close = () => socket.destroy()
      t.teardown(close)
      resolve({
        protocol: (res.headers['sec-websocket-protocol'] as string | undefined) ?? null,
        messages,
        close,
        async waitFor(n) {
          const until = Date.now() + 10_000
          while (messages.length < n) {
            if (Date.now() > until) throw new Error(`stream through nginx: ${messages.length} of ${n} messages`)
            await new Promise<void>(r => { waiters.push(r); setTimeout(r, 100) })
          }
        },
      })
    })
    req.end()
  })
}

/** The service with TRUSTED_PROXY as given (or none), and the shipped nginx in front of it. */
async function stack(t: Test, trustedProxy: string | null): Promise<{ api: TestService; ng: RunningNginx }> {
  const api = await startTestService(t, { env: trustedProxy ? { TRUSTED_PROXY: trustedProxy } : {} })
  const ng = await startNginx(t, NGINX!, new URL(api.url).host)
  return { api, ng }
}

const failedLogin = (ng: RunningNginx, from: string, email: string, headers?: Record<string, string>) =>
  call(ng, 'POST', '/v1/auth/dashboard/login', { from, body: { email, password: 'wrong password' }, ...(headers ? { headers } : {}) })

t.test('behind the shipped nginx, with TRUSTED_PROXY set to its address', { skip }, async t => {
  const { api, ng } = await stack(t, NGINX_PEER)
  const acct = await api.signup()
  const seen: string[] = [] // every body that came back through nginx

  t.test('TLS 1.2 is refused, TLS 1.3 serves the API', async t => {
    const old = await handshake(ng, { maxVersion: 'TLSv1.2' })
    t.ok('error' in old, 'a TLS 1.2-only client gets no session')
    if ('error' in old) t.match(old.error.code, /^ERR_SSL_(TLSV1_ALERT_PROTOCOL_VERSION|UNSUPPORTED_PROTOCOL)$/, `refused with a protocol version alert (${old.error.code})`)
    t.same(await handshake(ng, {}), { protocol: 'TLSv1.3' }, 'a client offering 1.2 and 1.3 gets 1.3')

    const health = await call(ng, 'GET', '/v1/health')
    seen.push(health.text)
    t.equal(health.protocol, 'TLSv1.3')
    t.equal(health.status, 200)
    t.match(health.body, { status: String })
    t.equal(health.headers['strict-transport-security'], 'max-age=63072000')
    const me = await call(ng, 'GET', '/v1/tenants/me', { token: acct.token })
    seen.push(me.text)
    t.equal(me.status, 200, 'Authorization reaches the service')
    t.match(me.body, { tenant: { id: acct.tenantId } })
  })

  t.test('the operator console is served through it and revalidated', async t => {
    const page = await call(ng, 'GET', '/console/')
    t.equal(page.status, 200)
    t.match(page.headers['content-type'], /^text\/html/)
    t.match(page.headers['content-security-policy'], /connect-src 'self'/, 'the service\'s own headers come back')
    const etag = page.headers['etag']
    t.ok(etag, 'an ETag')
    const again = await call(ng, 'GET', '/console/', { headers: { 'if-none-match': String(etag) } })
    t.equal(again.status, 304, 'If-None-Match reaches the service')
  })

  t.test('the WebSocket stream works through it (header and subprotocol auth, ?types kept)', async t => {
    const all = await openStream(t, ng, '', { authorization: `Bearer ${acct.token}` })
    const created = await openStream(t, ng, '?types=session.created', { protocols: `bearer, ${acct.token}` })
    t.equal(created.protocol, 'bearer', 'the subprotocol answer comes back through nginx')
    // A chunked body: nginx reads it whole and sends the service a Content-Length.
    const agentPhone = api.phone(1), customerPhone = api.phone(2)
    const s = await call(ng, 'POST', '/v1/sessions', { token: acct.token, body: { agentPhone, customerPhone }, chunked: true })
    seen.push(s.text)
    t.equal(s.status, 201, 'session created through nginx')
    await all.waitFor(2)
    await created.waitFor(1)
    await new Promise(r => setTimeout(r, 100))
    const types = (st: Stream) => st.messages.map(m => (JSON.parse(m) as EventEnvelope).type)
    t.same(types(all), ['session.created', 'session.activated'])
    t.same(types(created), ['session.created'], 'the query string reached the service')
    t.match(JSON.parse(all.messages[0]!), { data: { sessionId: s.body.id, tenantId: acct.tenantId, proxyNumber: s.body.proxyNumber } })
    seen.push(...all.messages, ...created.messages)
  })

  t.test('what the service gets: HTTP/1.1 on a kept-alive connection, the listed headers, the upgrade', async t => {
    // A second nginx, in front of a relay that keeps the bytes nginx sends the same service.
    const target = new URL(api.url)
    const relay = await startRecordingRelay({ host: target.hostname, port: Number(target.port) })
    t.teardown(() => relay.close())
    const via = await startNginx(t, NGINX!, relay.address)
    const junk = { 'x-junk': 'not for the service', 'x-forwarded-for': '198.51.100.1', accept: '*/*', cookie: 'a=b' }
    for (let i = 0; i < 2; i++) t.equal((await call(via, 'GET', '/v1/health', { headers: junk })).status, 200)
    const body = { agentPhone: api.phone(3), customerPhone: api.phone(4) }
    const created = await call(via, 'POST', '/v1/sessions', { token: acct.token, body, headers: { ...junk, 'idempotency-key': 'nginx-relay-1' } })
    seen.push(created.text)
    t.equal(created.status, 201)
    const ws = await openStream(t, via, '?types=session.created', { authorization: `Bearer ${acct.token}` })
    ws.close()

    const sent = relay.requests()
    const rest = sent.filter(r => r.target !== '/v1/stream?types=session.created')
    t.same(rest.map(r => `${r.method} ${r.target} ${r.version}`), ['GET /v1/health HTTP/1.1', 'GET /v1/health HTTP/1.1', 'POST /v1/sessions HTTP/1.1'], 'HTTP/1.1, the URI as sent')
    t.equal(new Set(rest.map(r => r.connection)).size, 1, 'three client connections, one upstream connection kept alive')
    const names = (r: UpstreamRequest) => r.headers.map(([k]) => k).sort()
    t.same(names(rest[0]!), ['host', 'x-forwarded-for'], 'no Connection header (keep-alive), none of the client\'s other headers')
    t.same(names(rest[2]!), ['authorization', 'content-length', 'content-type', 'host', 'idempotency-key', 'x-forwarded-for'])
    t.same(rest.map(r => r.headers.find(([k]) => k === 'x-forwarded-for')?.[1]), [CLIENT_A, CLIENT_A, CLIENT_A], 'X-Forwarded-For is the client\'s address only')
    const upgrade = sent.find(r => r.target === '/v1/stream?types=session.created')
    t.ok(upgrade, 'the handshake reached the service')
    t.match(Object.fromEntries(upgrade?.headers ?? []), {
      upgrade: 'websocket', connection: 'upgrade', 'sec-websocket-version': '13', 'sec-websocket-key': /^[A-Za-z0-9+/]{22}==$/, authorization: `Bearer ${acct.token}`,
    }, 'the WebSocket handshake headers')
  })

  t.test('the login throttle counts each client, not nginx', async t => {
    for (let i = 0; i < 5; i++) t.equal((await failedLogin(ng, CLIENT_A, 'a-nobody@example.test')).status, 401, `client A, attempt ${i + 1}`)
    const sixth = await failedLogin(ng, CLIENT_A, 'a-nobody@example.test')
    seen.push(sixth.text)
    t.equal(sixth.status, 429, 'client A is throttled')
    t.equal(sixth.body.detail, 'At most 5 attempts per minute', 'by the per-address limit')
    const spoofed = await failedLogin(ng, CLIENT_A, 'a-nobody@example.test', { 'x-forwarded-for': '198.51.100.9' })
    t.equal(spoofed.status, 429, 'an X-Forwarded-For the client wrote is replaced by nginx, not believed')
    t.equal((await failedLogin(ng, CLIENT_B, 'b-nobody@example.test')).status, 401, 'client B is not throttled')
    // nginx writes the line once the answer is out: it may lag the client by a moment.
    const line = new RegExp(`^${CLIENT_B.replace(/\./g, '\\.')} .*"POST /v1/auth/dashboard/login HTTP/1\\.1" 401`, 'm')
    t.ok(await eventually(async () => line.test(ng.accessLog()) || undefined, 'the access log line', 2_000), 'nginx logged client B by its address')
  })

  t.test('a client on nginx\'s own address cannot name another with X-Forwarded-For', async t => {
    // Why the shipped file sets $remote_addr and not $proxy_add_x_forwarded_for: appended to, the
    // header would read "<what the client wrote>, 127.0.0.1", and the service skips the trusted hop.
    const statuses: number[] = []
    for (let i = 0; i < 6; i++) statuses.push((await failedLogin(ng, NGINX_PEER, 'c-nobody@example.test', { 'x-forwarded-for': `198.51.100.${20 + i}` })).status)
    t.equal(statuses.at(-1), 429, `six attempts, six forwarded-for values: still one client (${statuses.join(' ')})`)
  })

  t.test('nginx\'s own refusals are problem documents', async t => {
    const purge = await call(ng, 'PURGE', '/v1/health')
    t.equal(purge.status, 405)
    t.equal(purge.headers['content-type'], 'application/problem+json')
    t.equal(purge.headers['allow'], 'GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS')
    t.match(purge.body, { type: /\/errors\/method-not-allowed$/, title: problems['method-not-allowed'].title, status: 405, instance: /^urn:maskline:err:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/ })
    const big = await call(ng, 'POST', '/v1/webhooks/cpaas/voice', { raw: 'x'.repeat(64 * 1024 + 1), headers: { 'content-type': 'application/x-www-form-urlencoded' } })
    t.equal(big.status, 413, 'a body over the service\'s largest limit stops at nginx')
    t.match(big.body, { type: /\/errors\/payload-too-large$/, title: problems['payload-too-large'].title, status: 413 })
    const overApiLimit = await call(ng, 'POST', '/v1/sessions', { token: acct.token, raw: 'x'.repeat(20_000), headers: { 'content-type': 'application/json' } })
    t.equal(overApiLimit.status, 413, 'under 64 KiB, the service answers its own limit')
    t.match(overApiLimit.body, { type: /\/errors\/payload-too-large$/, detail: /16384 bytes/ })
  })

  t.test('nothing through nginx carries a party number', async t => {
    t.same(seen.filter(b => [...api.partyNumbers, api.phone(1), api.phone(2)].some(n => b.includes(n))), [])
    t.notMatch(ng.accessLog(), /\+\d{6,}/, 'nor does its access log')
  })
})

t.test('control: without TRUSTED_PROXY every client behind nginx is nginx', { skip }, async t => {
  const { ng } = await stack(t, null)
  for (let i = 0; i < 5; i++) t.equal((await failedLogin(ng, CLIENT_A, 'a-nobody@example.test')).status, 401)
  t.equal((await failedLogin(ng, CLIENT_A, 'a-nobody@example.test')).status, 429)
  t.equal((await failedLogin(ng, CLIENT_B, 'b-nobody@example.test')).status, 429, 'client B shares client A\'s throttle: both are 127.0.0.1')
})

t.test('the service down: nginx answers 503 unavailable with Retry-After', { skip }, async t => {
  // An upstream port nothing listens on: a closed listener's port.
  const srv = net.createServer()
  await new Promise<void>(r => srv.listen(0, '127.0.0.1', r))
  const port = (srv.address() as { port: number }).port
  await new Promise(r => srv.close(r))
  const ng = await startNginx(t, NGINX!, `127.0.0.1:${port}`)
  const r = await call(ng, 'GET', '/v1/health')
  t.equal(r.status, 503)
  t.equal(r.headers['retry-after'], '2')
  t.match(r.body, { type: /\/errors\/unavailable$/, title: problems.unavailable.title, status: 503 })
})
