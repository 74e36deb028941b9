// The request pipeline of gateway/http (style 6): routing fallbacks, body cap, content type,
// JSON parsing, validation errors, allow-list serialization, error rendering and the log line.
import { request as httpRequest } from 'node:http'
import t, { type Test } from 'tap'
import { Type } from '@sinclair/typebox'
import { route, ApiProblem, JsonText } from '../../api/route.js'
import { E164, Uuid } from '../../api/schemas/common.js'
import { problems } from '../../api/problems.js'
import { startApi, problem, INSTANCE_RE, type Api } from './harness.js'

const PHONE = '+12025550143'
const ID = '01890a5d-ac96-774b-bcce-b302099a8057'

// A handler the test holds open: `entered` resolves when it runs, `release()` lets it answer.
let gate: Promise<void> = Promise.resolve()
let signalEntered: () => void = () => {}
function holdNext(): { entered: Promise<void>; release: () => void } {
  let release!: () => void
  gate = new Promise<void>(r => { release = r })
  const entered = new Promise<void>(r => { signalEntered = r })
  return { entered, release }
}

const testRoutes = [
  route({
    method: 'GET', path: '/t/slow', auth: 'none', response: { 200: Type.Object({ ok: Type.Boolean() }) }, problems: [],
    async handler() {
      signalEntered()
      await gate
      return { status: 200, body: { ok: true } }
    },
  }),
  route({
    method: 'GET', path: '/t/echo/:id', auth: 'none',
    params: Type.Object({ id: Uuid }),
    query: Type.Object({ n: Type.Optional(Type.Integer({ minimum: 1, default: 7 })), phone: Type.Optional(E164) }),
    response: { 200: Type.Object({ id: Type.String(), n: Type.Integer(), nested: Type.Optional(Type.Object({ keep: Type.String() })) }) },
    problems: [],
    handler(req) {
      // Fields outside the schema, a real number among them, must not reach the client.
      return { status: 200, body: { id: req.params.id, n: req.query.n, agentPhone: PHONE, nested: { keep: 'yes', customerPhone: PHONE } } }
    },
  }),
  route({
    method: 'POST', path: '/t/body', auth: 'none', bodyLimit: 64,
    body: Type.Object({ name: Type.String({ minLength: 2 }), n: Type.Integer() }, { additionalProperties: false }),
    response: { 201: Type.Object({ name: Type.String(), n: Type.Integer() }) },
    problems: ['validation'],
    handler(req) {
      return { status: 201, body: req.body }
    },
  }),
  route({
    method: 'POST', path: '/t/body-error', auth: 'none', validationSlug: 'validation-error',
    body: Type.Object({ phone: E164 }), response: { 204: null }, problems: ['validation-error'],
    handler: () => ({ status: 204 }),
  }),
  route({
    method: 'GET', path: '/t/boom', auth: 'none', response: { 200: null }, problems: [],
    handler() {
      const err = new Error(`duplicate key value (number)=(${PHONE})`) as Error & { code: string }
      err.code = '23505'
      throw err
    },
  }),
  route({
    method: 'GET', path: '/t/undeclared', auth: 'none', response: { 200: Type.Object({ a: Type.String() }) }, problems: [],
    handler: () => ({ status: 418, body: { a: 'x' } }),
  }),
  route({
    method: 'GET', path: '/t/bad-shape', auth: 'none', response: { 200: Type.Object({ a: Type.String() }) }, problems: [],
    handler: () => ({ status: 200, body: { b: 'x' } }),
  }),
  route({
    // A body written as JSON text (api/app/session-runner.ts viewJson): sent as is, checked in tests.
    method: 'GET', path: '/t/json-text', auth: 'none', query: Type.Object({ as: Type.String() }),
    response: { 200: Type.Object({ a: Type.String(), n: Type.Optional(Type.Integer()) }) }, problems: [],
    handler(req) {
      const text = { ok: '{"a":"x","n":2}', extra: `{"a":"x","agentPhone":"${PHONE}"}`, wrong: '{"a":1}' }[req.query.as as 'ok' | 'extra' | 'wrong']
      return { status: 200, body: new JsonText(text) }
    },
  }),
  route({
    method: 'GET', path: '/t/problem', auth: 'none', response: { 200: null }, problems: ['target-conflict'],
    handler() {
      throw new ApiProblem('target-conflict', 'The new target is in another live session on this proxy', { headers: { 'x-extra': '1' } })
    },
  }),
  route({
    // Headers go out in one native call (gateway/http/respond.ts): each must still be its own line.
    method: 'GET', path: '/t/headers', auth: 'none', response: { 200: Type.Object({ ok: Type.Boolean() }) }, problems: [],
    handler: () => ({
      status: 200, body: { ok: true },
      headers: { 'x-one': '1', 'x-two': 'two words; q=2', 'x-split': 'a\r\nx-injected: yes', 'x-nul': 'a\0b', 'x-three': '3' },
    }),
  }),
  route({
    method: 'POST', path: '/t/raw', auth: 'none', rawBody: true, contentType: 'application/xml',
    response: { 200: Type.String() }, problems: [],
    handler(req) {
      return { status: 200, body: `<Response><Say>${req.rawBody!.length}</Say></Response>` }
    },
  }),
  route({
    method: 'DELETE', path: '/t/empty', auth: 'none', response: { 204: null }, problems: [],
    handler: () => ({ status: 204 }),
  }),
  route({
    method: 'GET', path: '/t/union', auth: 'none', query: Type.Object({ found: Type.Boolean() }),
    response: { 200: Type.Union([
      Type.Object({ verified: Type.Literal(true), sessionId: Type.String() }),
      Type.Object({ verified: Type.Literal(false) }),
    ]) },
    problems: [],
    handler(req) {
      return { status: 200, body: req.query.found ? { verified: true, sessionId: 's1', agentPhone: PHONE } : { verified: false, sessionId: 's1' } }
    },
  }),
]

async function start(t: Test): Promise<Api> {
  return startApi(t, { routes: testRoutes, database: false })
}

/** A raw HTTP exchange, for what fetch cannot send (a lying Content-Length, a connection close). */
function rawExchange(port: number, head: string, body: Buffer | string): Promise<{ status: number; text: string; closed: boolean }> {
  return new Promise((resolve, reject) => {
    const lines = head.split('\n')
    const [method, path] = lines[0]!.split(' ')
    const headers = Object.fromEntries(lines.slice(1).map(l => l.split(': ') as [string, string]))
    const req = httpRequest({ host: '127.0.0.1', port, method, path, headers, agent: false }, res => {
      let text = ''
      res.on('data', d => { text += d })
      res.on('end', () => resolve({ status: res.statusCode!, text, closed: res.headers.connection === 'close' || !res.socket?.writable }))
    })
    req.on('error', reject)
    req.end(body)
  })
}

t.test('unknown route: 404 problem', async t => {
  const api = await start(t)
  const r = await api.get('/v1/nothing/here?userPhone=%2B12025550143')
  t.equal(r.status, 404)
  t.equal(r.headers.get('content-type'), 'application/problem+json')
  t.match(r.body.instance, INSTANCE_RE)
  t.same(r.body, { ...problem('not-found', 404), title: problems['not-found'].title, detail: 'No such endpoint', instance: r.body.instance })
  const line = api.logLines().at(-1)!
  t.same({ route: line.route, status: line.status, instance: line.instance }, { route: null, status: 404, instance: r.body.instance })
})

t.test('known path, wrong method: 405 problem with Allow', async t => {
  const api = await start(t)
  const r = await api.request('PATCH', '/t/body')
  t.equal(r.status, 405)
  t.equal(r.headers.get('allow'), 'POST')
  t.same(r.body, { ...problem('method-not-allowed', 405), title: problems['method-not-allowed'].title, detail: 'Allowed methods: POST', instance: r.body.instance })
  const p = await api.request('PUT', `/t/echo/${ID}`)
  t.equal(p.status, 405)
  t.equal(p.headers.get('allow'), 'GET')
})

t.test('body over the cap: 413 (the connection is covered by raw-socket.test.ts)', async t => {
  const api = await start(t)
  const port = Number(new URL(api.url).port)
  const big = JSON.stringify({ name: 'x'.repeat(100), n: 1 })
  // Declared too large: refused before reading.
  const declared = await rawExchange(port, `POST /t/body\nContent-Type: application/json\nContent-Length: ${big.length}`, big)
  t.equal(declared.status, 413)
  t.match(JSON.parse(declared.text), { type: 'https://maskline.test/errors/payload-too-large', status: 413, detail: 'The body may not exceed 64 bytes' })
  // Streamed without a length: refused as the bytes arrive.
  const chunked = await rawExchange(port, 'POST /t/body\nContent-Type: application/json\nTransfer-Encoding: chunked', big)
  t.equal(chunked.status, 413)
  // At the cap is fine.
  const ok = await api.post('/t/body', { body: { name: 'x'.repeat(40), n: 1 } })
  t.equal(ok.status, 201)
})

t.test('malformed JSON: 400 with the route validation slug', async t => {
  const api = await start(t)
  const r = await api.post('/t/body', { raw: '{"name": "ab", ', headers: { 'content-type': 'application/json' } })
  t.equal(r.status, 400)
  t.same(r.body, { ...problem('validation', 400), title: problems.validation.title, detail: 'The body is not valid JSON', instance: r.body.instance })
  const e = await api.post('/t/body-error', { raw: 'nope', headers: { 'content-type': 'application/json' } })
  t.equal(e.body.type, 'https://maskline.test/errors/validation-error')
})

t.test('a JSON body with another Content-Type: 415', async t => {
  const api = await start(t)
  for (const ct of ['text/plain', 'application/x-www-form-urlencoded']) {
    const r = await api.post('/t/body', { raw: '{"name":"ab","n":1}', headers: { 'content-type': ct } })
    t.equal(r.status, 415, ct)
    t.same(r.body, { ...problem('unsupported-media-type', 415), title: problems['unsupported-media-type'].title, detail: 'Send the body as application/json', instance: r.body.instance })
  }
  const missing = await api.post('/t/body', { raw: '{"name":"ab","n":1}' })
  t.equal(missing.status, 415, 'no Content-Type')
  const charset = await api.post('/t/body', { raw: '{"name":"ab","n":1}', headers: { 'content-type': 'application/json; charset=utf-8' } })
  t.equal(charset.status, 201, 'parameters are fine')
})

t.test('validation errors list every field with a stable issue code', async t => {
  const api = await start(t)
  const r = await api.post('/t/body', { body: { name: 'a', n: 'x', extra: true } })
  t.equal(r.status, 400)
  t.same(r.body, {
    ...problem('validation', 400), title: problems.validation.title, detail: 'The request has invalid fields', instance: r.body.instance,
    errors: [
      { field: 'extra', issue: 'unknown_field' },
      { field: 'name', issue: 'too_short' },
      { field: 'n', issue: 'invalid_type' },
    ],
  })
  const empty = await api.post('/t/body', { raw: '', headers: { 'content-type': 'application/json' } })
  t.same(empty.body.errors, [{ field: 'name', issue: 'required' }, { field: 'n', issue: 'required' }], 'an empty body is an empty object')
  const notObject = await api.post('/t/body', { body: [1] })
  t.same(notObject.body.errors, [{ field: 'body', issue: 'invalid_type' }])
  const q = await api.get('/t/echo/not-a-uuid?n=abc&phone=12025550143')
  t.equal(q.status, 400)
  t.same(q.body.errors, [
    { field: 'n', issue: 'invalid_type' },
    { field: 'phone', issue: 'invalid_format' },
    { field: 'id', issue: 'invalid_format' },
  ])
  t.notMatch(q.text, /12025550143/, 'the rejected value is not echoed')
  const e = await api.post('/t/body-error', { body: {} })
  t.same(e.body, { ...problem('validation-error', 400), title: problems['validation-error'].title, detail: 'The request has invalid fields', instance: e.body.instance, errors: [{ field: 'phone', issue: 'required' }] })
})

t.test('query and params are coerced and take defaults; + stays a plus', async t => {
  const api = await start(t)
  const r = await api.get(`/t/echo/${ID}?n=3&phone=+12025550143`)
  t.equal(r.status, 200)
  t.same(r.body, { id: ID, n: 3, nested: { keep: 'yes' } })
  const d = await api.get(`/t/echo/${ID}`)
  t.equal(d.body.n, 7)
  const bad = await api.get(`/t/echo/${ID}?n=%zz`)
  t.equal(bad.status, 400)
  t.equal(bad.body.detail, 'The query string is malformed')
})

t.test('responses go through the allow-list', async t => {
  const api = await start(t)
  const r = await api.get(`/t/echo/${ID}`)
  t.same(r.body, { id: ID, n: 7, nested: { keep: 'yes' } }, 'undeclared fields dropped, nested too')
  t.notMatch(r.text, /\+\d{8,15}/)
  const u1 = await api.get('/t/union?found=true')
  t.same(u1.body, { verified: true, sessionId: 's1' })
  const u2 = await api.get('/t/union?found=false')
  t.same(u2.body, { verified: false }, 'the variant that matches decides the fields')
})

t.test('a JSON text body is sent as written, and checked like any other', async t => {
  const api = await start(t)
  const ok = await api.get('/t/json-text?as=ok')
  t.equal(ok.status, 200)
  t.equal(ok.text, '{"a":"x","n":2}', 'the text itself, not a re-serialization')
  const extra = await api.get('/t/json-text?as=extra')
  t.equal(extra.status, 500, 'a field the schema does not declare is refused, not sent')
  t.notMatch(extra.text, /\+\d{8,15}/)
  t.equal((await api.get('/t/json-text?as=wrong')).status, 500, 'a field of the wrong type is refused')
})

t.test('unknown errors: 500 internal, no message anywhere', async t => {
  const api = await start(t)
  const r = await api.get('/t/boom')
  t.equal(r.status, 500)
  t.same(r.body, { ...problem('internal', 500), title: problems.internal.title, detail: 'An unexpected error occurred; retry with backoff', instance: r.body.instance })
  const line = api.logLines().at(-1)!
  t.equal(line.level, 50)
  t.equal(line.instance, r.body.instance, 'the instance id is in the log line')
  t.same({ type: line.error.type, code: line.error.code }, { type: 'Error', code: '23505' })
  t.notMatch(api.rawLogs.join(''), /duplicate key|12025550143/, 'the message is not logged')
})

t.test('a reply the route does not declare is a 500, not a leak', async t => {
  const api = await start(t)
  t.equal((await api.get('/t/undeclared')).status, 500)
  t.equal((await api.get('/t/bad-shape')).status, 500, 'checkResponses catches a body missing its fields')
})

t.test('ApiProblem from a handler: its slug, detail and headers', async t => {
  const api = await start(t)
  const r = await api.get('/t/problem')
  t.equal(r.status, 409)
  t.equal(r.headers.get('x-extra'), '1')
  t.same(r.body, { ...problem('target-conflict', 409), title: problems['target-conflict'].title, detail: 'The new target is in another live session on this proxy', instance: r.body.instance })
})

t.test('every header is its own line; a value that could end its line is never written', async t => {
  const api = await start(t)
  const r = await api.get('/t/headers')
  t.equal(r.status, 200)
  t.same(r.body, { ok: true })
  t.equal(r.headers.get('content-type'), 'application/json')
  t.equal(r.headers.get('x-one'), '1')
  t.equal(r.headers.get('x-two'), 'two words; q=2')
  t.equal(r.headers.get('x-three'), '3')
  t.equal(r.headers.get('x-split'), null)
  t.equal(r.headers.get('x-injected'), null)
  t.equal(r.headers.get('x-nul'), null)
  // An ApiProblem's headers ride in the same block as its content type.
  const p = await api.get('/t/problem')
  t.equal(p.headers.get('content-type'), 'application/problem+json')
  t.equal(p.headers.get('x-extra'), '1')
})

t.test('raw-body routes get the bytes and answer in their content type', async t => {
  const api = await start(t)
  const r = await api.post('/t/raw', { raw: 'CallSid=CA1&From=%2B12025550143', headers: { 'content-type': 'application/x-www-form-urlencoded' } })
  t.equal(r.status, 200)
  t.equal(r.headers.get('content-type'), 'application/xml')
  t.equal(r.text, '<Response><Say>31</Say></Response>')
})

t.test('204 has no body', async t => {
  const api = await start(t)
  const r = await api.del('/t/empty')
  t.equal(r.status, 204)
  t.equal(r.text, '')
  t.equal(r.headers.get('content-type'), null)
})

t.test('one log line per request: route pattern, status, duration; never the URL', async t => {
  const api = await start(t)
  await api.get(`/t/echo/${ID}?n=2&phone=%2B12025550143`)
  const lines = api.logLines()
  t.equal(lines.length, 1)
  const l = lines[0]!
  t.same(Object.keys(l).sort(), ['level', 'method', 'msg', 'route', 'service', 'status', 'time', 'us'])
  t.same({ method: l.method, route: l.route, status: l.status }, { method: 'GET', route: '/t/echo/:id', status: 200 })
  t.type(l.us, 'number')
  t.notMatch(api.rawLogs.join(''), new RegExp(`${ID}|12025550143|phone`))
})

t.test('close() waits for requests in flight', async t => {
  const api = await start(t)
  const port = Number(new URL(api.url).port)
  const hold = holdNext()
  const pending = api.get('/t/slow')
  await hold.entered
  const closing = api.http.close(5_000)
  await new Promise(r => setTimeout(r, 20))
  hold.release()
  const [res] = await Promise.all([pending, closing])
  t.equal(res.status, 200)
  t.same(res.body, { ok: true })
  await t.rejects(rawExchange(port, 'GET /v1/health', ''), 'no longer listening')
})

t.test('a client leaving mid-body is logged as 499 and leaves nothing in flight', async t => {
  const api = await start(t)
  const port = Number(new URL(api.url).port)
  const req = httpRequest({ host: '127.0.0.1', port, method: 'POST', path: '/t/body', agent: false, headers: { 'content-type': 'application/json', 'content-length': '60' } })
  req.on('error', () => {})
  req.write('{"name":')
  await new Promise(r => setTimeout(r, 50))
  req.destroy()
  for (let i = 0; i < 200 && !api.logLines().length; i++) await new Promise(r => setTimeout(r, 10))
  const line = api.logLines().at(-1)!
  t.same({ route: line.route, status: line.status, aborted: line.aborted }, { route: '/t/body', status: 499, aborted: true })
  const started = Date.now()
  await api.http.close(5_000)
  t.ok(Date.now() - started < 2_000, 'close() did not wait for the abandoned request')
})
