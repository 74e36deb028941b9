// contract D13: JSON bodies whose shape used to break the gateway. Nesting is bounded before
// validation (an 8,000-level array in pushConfig was a 500), and `__proto__` / `constructor`
// keys are plain data, kept like any other key (`__proto__` used to vanish from answers).
import t from 'tap'
import { startTestService } from '../support/service.js'

t.test('a deeply nested body is a 400 before validation', async t => {
  const api = await startTestService(t)
  const acct = await api.signup()
  const deep = '['.repeat(8000) + ']'.repeat(8000)
  for (const [method, path, body, token] of [
    ['PATCH', '/v1/config', `{"pushConfig":{"x":${deep}}}`, acct.ownerToken],
    ['POST', '/v1/sessions', `{"metadata":{"x":${deep}}}`, acct.token],
    ['POST', '/v1/auth/signup', `{"companyName":${deep}}`, undefined],
  ] as const) {
    const r = await fetch(api.url + path, { method, body, headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) } })
    t.equal(r.status, 400, `${method} ${path}`)
    t.match(r.headers.get('content-type'), /^application\/problem\+json/)
    t.match(await r.json(), { status: 400, type: /\/errors\/validation(-error)?$/, detail: 'The body nests deeper than 32 levels' })
  }
  // 32 levels still pass; brackets inside strings do not count.
  const ok = { x: JSON.parse('['.repeat(30) + ']'.repeat(30)), s: '[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[' }
  const r = await api.req('PATCH', '/v1/config', { token: acct.ownerToken, body: { pushConfig: ok } })
  t.equal(r.status, 200)
  t.same(r.body.pushConfig, ok)
})

t.test('__proto__ and constructor keys are kept as plain data', async t => {
  const api = await startTestService(t)
  const acct = await api.signup()
  const raw = `{"agentPhone":"${api.phone(1)}","customerPhone":"${api.phone(2)}","metadata":{"__proto__":"p","constructor":"c","toString":1,"order":"o-1"}}`
  const created = await api.req('POST', '/v1/sessions', { token: acct.token, raw, headers: { 'content-type': 'application/json' } })
  t.equal(created.status, 201)
  // jsonb keeps its own key order: compare entries.
  const entries = (o: object) => JSON.stringify(Object.entries(o).sort())
  const want = entries(JSON.parse('{"__proto__":"p","constructor":"c","toString":1,"order":"o-1"}'))
  t.equal(entries(created.body.metadata), want, 'the create answer keeps every key')
  const got = await api.req('GET', `/v1/sessions/${created.body.id}`, { token: acct.token })
  t.equal(entries(got.body.metadata), want, 'so does a read')
  const patched = await api.req('PATCH', `/v1/sessions/${created.body.id}`, {
    token: acct.token, raw: '{"metadata":{"__proto__":"q"}}', headers: { 'content-type': 'application/json' },
  })
  t.equal(patched.status, 200)
  t.equal(patched.body.metadata.__proto__, 'q', 'a patch of __proto__ changes the key')
  t.ok(Object.hasOwn(patched.body.metadata, '__proto__'))

  const cfg = await api.req('PATCH', '/v1/config', { token: acct.ownerToken, raw: '{"pushConfig":{"__proto__":{"a":1},"constructor":2}}', headers: { 'content-type': 'application/json' } })
  t.equal(cfg.status, 200)
  t.equal(entries(cfg.body.pushConfig), entries(JSON.parse('{"__proto__":{"a":1},"constructor":2}')))
})
