// GET /v1/openapi.json is generated from the route table: every route is in it and nothing else.
import t from 'tap'
import { Type } from '@sinclair/typebox'
import { route } from '../../api/route.js'
import { buildOpenApi, openApiPath } from '../../api/openapi.js'
import { Uuid } from '../../api/schemas/common.js'
import { Ajv } from 'ajv'
import formatsPlugin from 'ajv-formats'
import { startApi, ownRoutes, BASE_URL } from './harness.js'
import { startTestService } from '../support/service.js'
import { connectWs } from '../support/ws-client.js'
import { EVENT_TYPES } from '../../sql/vocabulary/event-envelope.js'
import { sessionRoutes } from '../../api/routes/sessions.js'
import { cpaasRoutes } from '../../api/cpaas/callbacks/routes.js'

const withParams = route({
  method: 'GET', path: '/v1/things/:id/parts/:partId', auth: 'tenant', summary: 'A part',
  params: Type.Object({ id: Uuid, partId: Type.String() }), query: Type.Object({ limit: Type.Optional(Type.Integer({ default: 5 })) }),
  response: { 200: Type.Object({ id: Type.String() }) }, problems: ['not-found'],
  handler: () => ({ status: 200, body: { id: 'x' } }),
})

t.test('every route is documented, and only routes are', async t => {
  const routes = ownRoutes([withParams])
  const api = await startApi(t, { routes, database: false })
  const r = await api.get('/v1/openapi.json')
  t.equal(r.status, 200)
  const doc = r.body
  t.equal(doc.openapi, '3.1.0')
  t.same(doc.servers, [{ url: BASE_URL }])
  const documented = Object.entries(doc.paths as Record<string, Record<string, unknown>>).flatMap(([p, ops]) => Object.keys(ops).map(m => `${m.toUpperCase()} ${p}`)).sort()
  const expected = routes.map(r => `${r.method} ${openApiPath(r.path)}`).sort()
  t.same(documented, expected)
  t.ok(expected.includes('GET /v1/openapi.json'), 'the document lists itself')
  t.ok(expected.includes('GET /v1/things/{id}/parts/{partId}'))
})

t.test('operations carry parameters, bodies, responses and problems', async t => {
  const doc = buildOpenApi(ownRoutes([withParams]), { baseUrl: BASE_URL }) as any
  const part = doc.paths['/v1/things/{id}/parts/{partId}'].get
  t.same(part.parameters, [
    { name: 'id', in: 'path', required: true, schema: { format: 'uuid', type: 'string' } },
    { name: 'partId', in: 'path', required: true, schema: { type: 'string' } },
    { name: 'limit', in: 'query', required: false, schema: { default: 5, type: 'integer' } },
  ])
  t.same(part.security, [{ bearer: [] }])
  t.same(Object.keys(part.responses).sort(), ['200', '400', '401', '403', '404', '429', '500'])

  const patch = doc.paths['/v1/config'].patch
  t.match(patch.responses['400'].description, /validation-error/)
  t.same(patch['x-maskline-auth'], { token: 'user', roles: ['OWNER', 'ADMIN'] })
  t.equal(patch.requestBody.content['application/json'].schema.properties.recordingConsentMode.enum.join(','), 'DEFAULT,CUSTOM,NONE')
  t.same(Object.keys(patch.responses).sort(), ['200', '400', '401', '403', '409', '413', '415', '429', '500'])
  t.same(patch.responses['409'].content, { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } })

  const devices = doc.paths['/v1/devices/token'].post
  t.same(devices.responses['204'], { description: 'HTTP 204, empty body' })
  const provision = doc.paths['/v1/numbers/provision'].post
  t.same(provision.responses['501'].content['application/json'].schema.required, ['error'])
  t.notOk(doc.paths['/v1/health'].get.security, 'health needs no token')
  t.ok(doc.components.schemas.Problem.properties.instance)
})

const RATE_HEADERS = ['Retry-After', 'X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset', 'X-RateLimit-Policy']

t.test('429 answers declare the headers the limiter sends with them', async t => {
  // The tenant's limit refuses; the signup throttle (same limiter, another key) admits.
  const refuse = { hit: async (key: string, limit: number) => key.startsWith('tenant:')
    ? { allowed: false, limit, remaining: 0, resetAt: Date.now() + 30_000 }
    : { allowed: true, limit, remaining: limit - 1, resetAt: Date.now() + 60_000 } }
  const api = await startApi(t, { routes: ownRoutes([withParams]), services: { rateLimiter: refuse } })
  const doc = (await api.get('/v1/openapi.json')).body
  t.same(Object.keys(doc.components.headers).sort(), [...RATE_HEADERS].sort())
  const declared = doc.paths['/v1/things/{id}/parts/{partId}'].get.responses['429']
  t.same(Object.keys(declared.headers).sort(), [...RATE_HEADERS].sort())
  for (const h of RATE_HEADERS) t.same(declared.headers[h], { $ref: `#/components/headers/${h}` })
  t.match(doc.paths['/v1/auth/signup'].post.responses['429'].headers, { 'Retry-After': {} }, 'the throttled routes without a token too')
  t.notOk(doc.paths['/v1/health'].get.responses['429'], 'health is not rate-limited')

  const a = await api.signup()
  const r = await api.get('/v1/things/x/parts/y', { token: a.accessToken })
  t.equal(r.status, 429)
  const sent = [...r.headers.keys()].filter(h => h === 'retry-after' || h.startsWith('x-ratelimit-')).sort()
  t.same(sent, RATE_HEADERS.map(h => h.toLowerCase()).sort(), 'what is sent is what is declared')
  t.equal(r.headers.get('x-ratelimit-policy'), doc.components.headers['X-RateLimit-Policy'].schema.enum[0])
})

t.test('the service\'s document: lists itself, describes the stream, and its envelope schema fits the real messages', async t => {
  const s = await startTestService(t)
  const doc = (await s.req('GET', '/v1/openapi.json')).body
  t.ok(doc.paths['/v1/openapi.json']?.get, 'GET /v1/openapi.json is in the document')
  t.notOk(doc.paths['/v1/stream'], 'the stream is not an HTTP operation')
  const stream = doc['x-maskline-websockets']['/v1/stream']
  t.match(stream.description, /bearer, <jwt>/)
  t.same(stream.parameters.find((p: { name: string }) => p.name === 'types').schema.items.enum, [...EVENT_TYPES])
  t.same(stream.messages, { $ref: '#/components/schemas/EventEnvelope' })

  // Real messages: a session created, activated and called, as a stream client receives them.
  const acct = await s.signup()
  const c = await connectWs(`${s.url}/v1/stream`, { headers: { authorization: `Bearer ${acct.token}` } })
  t.teardown(() => { c.socket.destroy() })
  const created = await s.req('POST', '/v1/sessions', { token: acct.token, body: { agentPhone: s.phone(1), customerPhone: s.phone(2) } })
  t.equal(created.status, 201)
  await (await s.driver.voice({ from: s.phone(2), to: created.body.proxyNumber, callSid: `v3:openapi-${process.pid}` })).text()
  await c.waitForMessages(3, 10_000)
  const ajv = new Ajv({ strict: false, allowUnionTypes: true })
  formatsPlugin.default(ajv)
  const check = ajv.compile(doc.components.schemas.EventEnvelope)
  t.same(c.messages.map(m => JSON.parse(m).type), ['session.created', 'session.activated', 'call.incoming'])
  for (const m of c.messages) t.ok(check(JSON.parse(m)), `${JSON.parse(m).type} fits: ${ajv.errorsText(check.errors)}`)
  t.notOk(check({ ...JSON.parse(c.messages[0]!), extra: 1 }), 'and nothing else')
})

t.test('contract D11: the SMS opt-out texts, the reason of a dropped SMS, the keywords on the SMS callback', async t => {
  const noop = () => ({ status: 200 })
  const cpaas = cpaasRoutes({ voice: noop, voiceStatus: noop, dialStatus: noop, recording: noop, sms: async () => ({ status: 200 }) })
  const doc = buildOpenApi(ownRoutes([...sessionRoutes, ...cpaas]), { baseUrl: BASE_URL }) as any
  const body = doc.paths['/v1/config'].patch.requestBody.content['application/json'].schema
  for (const f of ['smsOptOutText', 'smsHelpText']) {
    t.match(JSON.stringify(body.properties[f]), /"maxLength":320/, `${f} is bounded`)
    t.notOk(body.required?.includes(f), `${f} is optional`)
    t.ok(doc.paths['/v1/config'].get.responses['200'].content['application/json'].schema.properties[f], `${f} is read back`)
  }
  const sms = doc.paths['/v1/sessions/{id}/sms'].get.responses['200'].content['application/json'].schema
  t.match(JSON.stringify(sms), /opted_out/, 'an SMS record says why it was dropped')
  t.match(doc.paths['/v1/webhooks/cpaas/sms'].post.summary, /STOP/, 'the callback documents the keywords')
})

t.test('contract D10: stickyProxy, inactivityTimeoutMinutes and channels on the session', async t => {
  const { sessionRoutes: routes } = await import('../../api/routes/sessions.js')
  const doc = buildOpenApi(ownRoutes(routes), { baseUrl: BASE_URL }) as any
  const create = doc.paths['/v1/sessions'].post
  const body = create.requestBody.content['application/json'].schema
  t.match(body.properties.stickyProxy, { type: 'boolean', description: /30 days/ })
  t.match(body.properties.inactivityTimeoutMinutes, { type: 'integer', minimum: 1, maximum: 10080, description: /POST \/v1\/sessions\/:id\/end/ })
  t.match(body.properties.channels, { type: 'array', minItems: 1, maxItems: 2, uniqueItems: true, description: /sms\.blocked/ })
  t.same(body.properties.channels.items.anyOf.map((s: { const: string }) => s.const), ['voice', 'sms'])
  for (const f of ['stickyProxy', 'inactivityTimeoutMinutes', 'channels']) t.notOk(body.required.includes(f), `${f} is optional`)
  const patch = doc.paths['/v1/sessions/{id}'].patch.requestBody.content['application/json'].schema
  t.match(JSON.stringify(patch.properties.inactivityTimeoutMinutes), /"maximum":10080.*"type":"null"/, 'PATCH sets it, or null switches it off')
  const view = create.responses['201'].content['application/json'].schema
  t.ok(view.properties.channels && view.properties.inactivityTimeoutMinutes, 'the session shows both')
  t.notOk(view.properties.stickyProxy, 'stickyProxy is a create instruction, not session state')
})

t.test('contract D12: pool.low in the vocabulary and the envelope schema, refusals in the analytics', async t => {
  const { analyticsRoutes } = await import('../../api/routes/analytics.js')
  const { newEnvelope, SUBSCRIBABLE_EVENTS } = await import('../../sql/vocabulary/event-envelope.js')
  t.ok(EVENT_TYPES.includes('pool.low') && (SUBSCRIBABLE_EVENTS as readonly string[]).includes('pool.low'), 'a type, and subscribable')
  const doc = buildOpenApi(ownRoutes(analyticsRoutes), { baseUrl: BASE_URL, stream: true }) as any
  const ajv = new Ajv({ strict: false, allowUnionTypes: true })
  formatsPlugin.default(ajv)
  const fits = ajv.compile(doc.components.schemas.EventEnvelope)
  const pool = newEnvelope('pool.low', Date.UTC(2026, 10, 24), {
    tenantId: '0190a000-0000-7000-8000-00000000000a', state: 'LOW', region: 'US', threshold: 10, total: 20, available: 1, inUse: 19, cooldown: 0,
  })
  t.ok(fits(pool), `a pool event without session fields fits: ${ajv.errorsText(fits.errors)}`)
  t.notOk(fits({ ...pool, data: { ...pool.data, phone: '+12025550100' } }), 'and nothing else')
  t.ok(doc['x-maskline-websockets']['/v1/stream'].parameters[0].schema.items.enum.includes('pool.low'), 'the stream filter takes it')
  const bucket = doc.paths['/v1/analytics/sessions-over-time'].get.responses['200'].content['application/json'].schema.items
  t.match(bucket.properties.poolExhausted, { type: 'integer', minimum: 1, description: /pool-exhausted/ })
  t.notOk(bucket.required.includes('poolExhausted'), 'additive: optional')
})
