// GET /v1/openapi.json is generated from the route table: every route is in it and nothing else.
import t from 'tap'
import { Type } from '@sinclair/typebox'
import { route } from '../../api/route.js'
import { buildOpenApi, openApiPath } from '../../api/openapi.js'
import { Uuid } from '../../api/schemas/common.js'
import { startApi, ownRoutes, BASE_URL } from './harness.js'

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
