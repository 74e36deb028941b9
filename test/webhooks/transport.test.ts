// The webhook POST itself: status only, no redirects followed, one timeout for the whole attempt,
// short error codes, and the connection made to the address the SSRF lookup checked.
import t, { type Test } from 'tap'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { createHttpTransport, errorCode } from '../../gateway/webhooks/transport.js'
import type { Resolver } from '../../api/webhooks/ssrf.js'

async function server(t: Test, handler: http.RequestListener) {
  const requests: Array<{ url: string; headers: http.IncomingHttpHeaders; body: string }> = []
  const s = http.createServer((req, res) => {
    let body = ''
    req.on('data', c => { body += c })
    req.on('end', () => { requests.push({ url: req.url ?? '', headers: req.headers, body }); handler(req, res) })
  })
  await new Promise<void>(r => s.listen(0, '127.0.0.1', r))
  t.teardown(() => { s.closeAllConnections(); s.close() })
  return { port: (s.address() as AddressInfo).port, requests }
}

const fixed = (table: Record<string, string>): Resolver => (host, _o, cb) =>
  table[host] ? cb(null, [{ address: table[host]!, family: 4 }]) : cb(Object.assign(new Error('nx'), { code: 'ENOTFOUND' }), [])

t.test('POSTs the body with the given headers; 2xx/4xx/5xx come back as the status', async t => {
  let status = 204
  const s = await server(t, (_req, res) => res.writeHead(status).end('x'.repeat(100_000)))
  const send = createHttpTransport({ allowInsecure: true })
  t.teardown(() => send.close())
  const req = { url: `http://127.0.0.1:${s.port}/hook?a=1`, headers: { 'webhook-id': 'msg_1' }, body: '{"a":1}', timeoutMs: 2_000 }
  t.same(await send(req), { statusCode: 204, error: null })
  t.match(s.requests[0], { url: '/hook?a=1', body: '{"a":1}', headers: { 'webhook-id': 'msg_1', 'content-type': 'application/json', 'user-agent': /^maskline-webhooks/ } })
  status = 410
  t.same(await send(req), { statusCode: 410, error: null })
  status = 500
  t.same(await send(req), { statusCode: 500, error: null })
})

t.test('redirects are not followed', async t => {
  const target = await server(t, (_req, res) => res.writeHead(200).end())
  const s = await server(t, (_req, res) => res.writeHead(307, { location: `http://127.0.0.1:${target.port}/meta-data` }).end())
  const send = createHttpTransport({ allowInsecure: true })
  t.teardown(() => send.close())
  t.same(await send({ url: `http://127.0.0.1:${s.port}/`, headers: {}, body: '{}', timeoutMs: 2_000 }), { statusCode: 307, error: null })
  t.equal(target.requests.length, 0)
})

t.test('one timeout bounds the attempt; refused connections and bad URLs give short codes', async t => {
  const s = await server(t, () => { /* never answers */ })
  const send = createHttpTransport({ allowInsecure: true })
  t.teardown(() => send.close())
  const started = Date.now()
  t.same(await send({ url: `http://127.0.0.1:${s.port}/`, headers: {}, body: '{}', timeoutMs: 200 }), { statusCode: 0, error: 'timeout' })
  t.ok(Date.now() - started < 1_500)
  t.same(await send({ url: 'http://127.0.0.1:9/', headers: {}, body: '{}', timeoutMs: 2_000 }), { statusCode: 0, error: 'connection-refused' })
  t.same(await send({ url: 'nope', headers: {}, body: '{}', timeoutMs: 2_000 }), { statusCode: 0, error: 'invalid-url' })
  const strict = createHttpTransport({ allowInsecure: false })
  t.teardown(() => strict.close())
  t.same(await strict({ url: `http://127.0.0.1:${s.port}/`, headers: {}, body: '{}', timeoutMs: 2_000 }), { statusCode: 0, error: 'insecure-scheme' })
  t.same(await strict({ url: 'https://[::1]:9/', headers: {}, body: '{}', timeoutMs: 2_000 }), { statusCode: 0, error: 'blocked-address' })
})

t.test('the socket connects to the address the lookup checked', async t => {
  const s = await server(t, (_req, res) => res.writeHead(200).end())
  // A name that resolves (here, by a fixed table) to loopback: refused when secure...
  const strict = createHttpTransport({ allowInsecure: false, resolve: fixed({ 'hooks.example.com': '127.0.0.1' }) })
  t.teardown(() => strict.close())
  t.same(await strict({ url: `https://hooks.example.com:${s.port}/`, headers: {}, body: '{}', timeoutMs: 2_000 }), { statusCode: 0, error: 'blocked-address' })
  t.same(await strict({ url: `https://unknown.example.com:${s.port}/`, headers: {}, body: '{}', timeoutMs: 2_000 }), { statusCode: 0, error: 'dns-failure' })
  t.equal(s.requests.length, 0)
  // ...and, when allowed, the request really goes where the lookup said (not where public DNS would).
  const open = createHttpTransport({ allowInsecure: true, resolve: fixed({ 'hooks.example.com': '127.0.0.1' }) })
  t.teardown(() => open.close())
  t.same(await open({ url: `http://hooks.example.com:${s.port}/x`, headers: {}, body: '{}', timeoutMs: 2_000 }), { statusCode: 200, error: null })
  t.equal(s.requests[0]?.headers.host, `hooks.example.com:${s.port}`)
})

t.test('error codes never carry the message', async t => {
  t.equal(errorCode(Object.assign(new Error('getaddrinfo ENOTFOUND secret.example'), { code: 'ENOTFOUND' })), 'dns-failure')
  t.equal(errorCode(Object.assign(new Error('x'), { code: 'ECONNRESET' })), 'connection-reset')
  t.equal(errorCode(Object.assign(new Error('x'), { code: 'DEPTH_ZERO_SELF_SIGNED_CERT' })), 'tls-error')
  t.equal(errorCode(Object.assign(new Error('x'), { code: 'ERR_TLS_CERT_ALTNAME_INVALID' })), 'tls-error')
  t.equal(errorCode(Object.assign(new Error('x'), { code: 'EHOSTUNREACH' })), 'unreachable')
  t.equal(errorCode(new Error('weird')), 'network-error')
  t.equal(errorCode(null), 'network-error')
})
