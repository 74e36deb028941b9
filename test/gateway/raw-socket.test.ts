// What a careless client or an attacker sends on a raw connection. Every request uWS
// hands to us is answered on the connection it came on, and that connection stays usable; the
// requests uWS itself drops are the limits listed in docs/http-limits.md, checked here so
// the doc stays true.
import { request as httpRequest, Agent } from 'node:http'
import net from 'node:net'
import t from 'tap'
import { startApi } from './harness.js'

interface Parsed { status: number; headers: Record<string, string>; body: string }

/** Parses the HTTP/1.1 responses in `raw` (bodies by Content-Length; none on 204/304). */
function parseResponses(raw: Buffer): Parsed[] {
  const out: Parsed[] = []
  let at = 0
  while (at < raw.length) {
    const end = raw.indexOf('\r\n\r\n', at)
    if (end === -1) break
    const [statusLine, ...lines] = raw.subarray(at, end).toString('latin1').split('\r\n')
    const headers: Record<string, string> = {}
    for (const l of lines) {
      const i = l.indexOf(':')
      headers[l.slice(0, i).toLowerCase()] = l.slice(i + 1).trim()
    }
    const status = Number(statusLine!.split(' ')[1])
    const len = status === 204 || status === 304 ? 0 : Number(headers['content-length'] ?? 0)
    out.push({ status, headers, body: raw.subarray(end + 4, end + 4 + len).toString('utf8') })
    at = end + 4 + len
  }
  return out
}

interface Exchange { responses: Parsed[]; closed: boolean; ms: number }

/** In `parts`: wait until one more response has arrived before writing on. */
const ANSWERED = Symbol('answered')

/**
 * Writes `parts` in order (a pause between them, so each arrives as its own segment) and
 * collects what comes back until `expect` responses arrived, the server closed, or `waitMs`.
 */
function exchange(port: number, parts: (string | Buffer | typeof ANSWERED)[], o: { expect?: number; waitMs?: number } = {}): Promise<Exchange> {
  const waitMs = o.waitMs ?? 2_000
  return new Promise(resolve => {
    const t0 = Date.now()
    const sock = net.connect(port, '127.0.0.1')
    sock.setNoDelay(true)
    const chunks: Buffer[] = []
    let done = false
    const finish = (closed: boolean) => {
      if (done) return
      done = true
      clearTimeout(timer)
      sock.destroy()
      resolve({ responses: parseResponses(Buffer.concat(chunks)), closed, ms: Date.now() - t0 })
    }
    const timer = setTimeout(() => finish(false), waitMs)
    sock.on('data', d => {
      chunks.push(d)
      if (o.expect !== undefined && parseResponses(Buffer.concat(chunks)).length >= o.expect) finish(false)
    })
    sock.on('error', () => finish(true))
    sock.on('close', () => finish(true))
    void (async () => {
      let awaited = 0
      for (const p of parts) {
        if (done) return
        if (p === ANSWERED) {
          awaited++
          while (!done && parseResponses(Buffer.concat(chunks)).length < awaited) await new Promise(r => setTimeout(r, 5))
          continue
        }
        sock.write(p)
        await new Promise(r => setTimeout(r, 5))
      }
    })()
  })
}

const HEALTH = 'GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n'

t.test('a 204 has no body and no Content-Length, and keep-alive works after it', async t => {
  const api = await startApi(t)
  const a = await api.signup()
  const port = Number(new URL(api.url).port)
  const body = JSON.stringify({ userPhone: '+14155550142', token: 'push-token-1', platform: 'ios' })
  const r = await exchange(port, [
    `POST /v1/devices/token HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${a.accessToken}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    ANSWERED, HEALTH,
  ], { expect: 2 })
  t.equal(r.responses.length, 2, 'both requests answered on one connection')
  t.equal(r.responses[0]!.status, 204)
  t.equal(r.responses[0]!.headers['content-length'], undefined, 'no Content-Length on 204')
  t.equal(r.responses[1]!.status, 200, 'the next request on the connection is answered')
  t.match(JSON.parse(r.responses[1]!.body), { status: 'healthy' })
})

t.test('an over-large body gets its 413, with fetch, http.request and on a raw connection', async t => {
  const api = await startApi(t)
  const port = Number(new URL(api.url).port)
  const big = Buffer.alloc(10 * 1024 * 1024, 'a')
  const want = { type: 'https://maskline.test/errors/payload-too-large', status: 413, detail: 'The body may not exceed 16384 bytes' }

  const declared = await fetch(`${api.url}/v1/auth/signup`, { method: 'POST', body: big, headers: { 'content-type': 'application/json' } })
  t.equal(declared.status, 413, 'fetch, Content-Length')
  t.match(await declared.json(), want)

  const chunks = new ReadableStream({ start(c) { for (let i = 0; i < 160; i++) c.enqueue(big.subarray(i * 65536, (i + 1) * 65536)); c.close() } })
  const streamed = await fetch(`${api.url}/v1/auth/signup`, { method: 'POST', body: chunks, duplex: 'half', headers: { 'content-type': 'application/json' } } as RequestInit)
  t.equal(streamed.status, 413, 'fetch, chunked')
  t.match(await streamed.json(), want)

  // http.request: the answer and no error on the request (EPIPE / ECONNRESET when the server
  // closed with the body unread). Then the same keep-alive socket carries the next request.
  const agent = new Agent({ keepAlive: true, maxSockets: 1 })
  t.teardown(() => agent.destroy())
  const viaHttp = (path: string, payload: Buffer | string, method = 'POST') => new Promise<{ status: number; text: string; error: string | null; socket: unknown }>(resolve => {
    let error: string | null = null
    const req = httpRequest({ host: '127.0.0.1', port, method, path, agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } }, res => {
      let text = ''
      res.on('data', d => { text += d })
      res.on('end', () => setTimeout(() => resolve({ status: res.statusCode!, text, error, socket: req.socket }), 50))
    })
    req.on('error', e => { error = (e as NodeJS.ErrnoException).code ?? e.message })
    req.end(payload)
  })
  const first = await viaHttp('/v1/auth/signup', big)
  t.equal(first.status, 413, 'http.request')
  t.equal(first.error, null, 'no EPIPE or reset on the request')
  t.match(JSON.parse(first.text), want)
  const second = await viaHttp('/v1/health', '', 'GET')
  t.equal(second.status, 200)
  t.equal(second.socket, first.socket, 'the same connection carried the next request')

  // Raw: a declared body over the cap, sent in full, then another request on the connection.
  const small = 'x'.repeat(20_000)
  const raw = await exchange(port, [
    `POST /v1/auth/signup HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${small.length}\r\n\r\n`, ANSWERED, small, HEALTH,
  ], { expect: 2 })
  t.same(raw.responses.map(r => r.status), [413, 200], 'raw: 413, then the next request is answered')
  // Chunked over the cap: read and dropped to its end, then answered; the connection lives on.
  const chunked = await exchange(port, [
    'POST /v1/auth/signup HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n',
    `4e20\r\n${small}\r\n`, `4e20\r\n${small}\r\n`, '0\r\n\r\n', ANSWERED, HEALTH,
  ], { expect: 2 })
  t.same(chunked.responses.map(r => r.status), [413, 200], 'raw chunked: 413, then the next request is answered')
})

t.test('methods uWS routes are answered at once: 405 with Allow, or 404', async t => {
  const api = await startApi(t)
  const port = Number(new URL(api.url).port)
  for (const method of ['OPTIONS', 'HEAD', 'TRACE', 'PUT', 'CONNECT']) {
    const r = await exchange(port, [`${method} /v1/health HTTP/1.1\r\nHost: x\r\n\r\n`], { expect: 1 })
    t.equal(r.responses[0]?.status, 405, method)
    t.equal(r.responses[0]?.headers['allow'], 'GET', `${method} Allow`)
    t.ok(r.ms < 1_000, `${method} answered at once`)
  }
  const unknownPath = await exchange(port, ['OPTIONS /nowhere HTTP/1.1\r\nHost: x\r\n\r\n'], { expect: 1 })
  t.equal(unknownPath.responses[0]?.status, 404)
})

// The limits of uWS 20.30 (docs/http-limits.md): these never reach a handler, so nothing in
// the service can answer them. Each is checked for what the doc says, and for a server that
// serves the next connection at once.
t.test('requests uWS drops without an answer are the documented ones', async t => {
  const api = await startApi(t)
  const port = Number(new URL(api.url).port)
  const headers = (n: number) => Array.from({ length: n }, (_, i) => `X-H${i}: v\r\n`).join('')
  const inSegments = (s: string) => s.match(/[\s\S]{1,1024}/g)!
  const a = await api.signup()
  const slowFirst = `POST /v1/devices/presence HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${a.accessToken}\r\nContent-Type: application/json\r\nContent-Length: 62\r\n\r\n{"userPhone":"+14155550142","status":"online","platform":"ios"}`
  const cases: { name: string; parts: string[]; outcome: 'closed' | 'no answer' }[] = [
    // Pipelining: a request that arrives while the one before it is still being answered closes
    // the connection, and the first answer is lost with it.
    { name: 'a pipelined request', parts: [slowFirst + HEALTH], outcome: 'closed' },
    { name: 'an unknown method', parts: ['PURGE /v1/health HTTP/1.1\r\nHost: x\r\n\r\n'], outcome: 'closed' },
    { name: 'a lower-case method', parts: ['get /v1/health HTTP/1.1\r\nHost: x\r\n\r\n'], outcome: 'closed' },
    { name: 'HTTP/1.0', parts: ['GET /v1/health HTTP/1.0\r\nHost: x\r\n\r\n'], outcome: 'no answer' },
    { name: '50 header fields', parts: [`GET /v1/health HTTP/1.1\r\nHost: x\r\n${headers(49)}\r\n`], outcome: 'no answer' },
    { name: 'obs-fold', parts: ['GET /v1/health HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n'], outcome: 'no answer' },
    { name: 'a request head over 4 KiB in several segments', parts: inSegments(`GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(8192)}\r\n\r\n`), outcome: 'closed' },
    { name: 'a query over 4 KiB in several segments', parts: inSegments(`GET /v1/health?${'a'.repeat(8192)} HTTP/1.1\r\nHost: x\r\n\r\n`), outcome: 'closed' },
  ]
  for (const c of cases) {
    const r = await exchange(port, c.parts, { waitMs: 500 })
    t.same(r.responses, [], `${c.name}: no answer`)
    t.equal(r.closed ? 'closed' : 'no answer', c.outcome, `${c.name}: ${c.outcome}`)
    const next = await exchange(port, [HEALTH], { expect: 1 })
    t.equal(next.responses[0]?.status, 200, `${c.name}: the next connection is served`)
  }
  // Under the limits, in one segment, a 49-field request is served.
  const ok = await exchange(port, [`GET /v1/health HTTP/1.1\r\nHost: x\r\n${headers(40)}\r\n`], { expect: 1 })
  t.equal(ok.responses[0]?.status, 200, '41 header fields are fine')
})
