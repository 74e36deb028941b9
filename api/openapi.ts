// OpenAPI 3.1 from the route table (style 5: the schemas are the single source). Every route
// appears once; problem responses are grouped by status with the slugs they can carry.
import type { TSchema } from '@sinclair/typebox'
import { problems, type ProblemSlug } from './problems.js'
import type { RouteDef } from './route.js'
import { ProblemDocument } from './schemas/common.js'
import { EventEnvelopeSchema } from './schemas/events.js'
import { EVENT_TYPES } from '../sql/vocabulary/event-envelope.js'

type Json = Record<string, unknown>

/** TypeBox schemas carry symbol keys; JSON drops them. */
const plain = (s: TSchema): Json => JSON.parse(JSON.stringify(s)) as Json

/** `/v1/sessions/:id` → `/v1/sessions/{id}`. */
export function openApiPath(path: string): string {
  return path.replace(/:([A-Za-z0-9_]+)/g, '{$1}')
}

function objectProperties(s: Json): { props: Record<string, Json>; required: string[] } {
  if (Array.isArray(s.allOf)) {
    const parts = (s.allOf as Json[]).map(objectProperties)
    return { props: Object.assign({}, ...parts.map(p => p.props)), required: parts.flatMap(p => p.required) }
  }
  return { props: (s.properties ?? {}) as Record<string, Json>, required: (s.required ?? []) as string[] }
}

/** The problems a route can answer with: its own list plus what the gateway adds. */
export function routeProblems(r: RouteDef): ProblemSlug[] {
  const all = new Set<ProblemSlug>(r.problems)
  if (r.auth !== 'none') { all.add('unauthorized'); all.add('forbidden') }
  if (r.auth !== 'none' && r.rateLimit !== false) all.add('rate-limit')
  if (r.body || r.query || r.params) all.add(r.validationSlug ?? 'validation')
  if (r.body || r.rawBody) all.add('payload-too-large')
  if (r.body && !r.rawBody) all.add('unsupported-media-type')
  all.add('internal')
  return [...all]
}

/**
 * Contract 8.1-8.3: what a 429 carries. `rate-limit` (the tenant's request limit, the sign-in and
 * signup throttles) sends Retry-After and the X-RateLimit-* of the window; an account locked by
 * failed sign-ins sends Retry-After alone; `tier-session-limit` carries the X-RateLimit-* of the
 * request's own window, no Retry-After. test/gateway/openapi.test.ts compares these with what is sent.
 */
const RATE_LIMIT_HEADERS = {
  'Retry-After': { description: 'Seconds until a retry can be admitted (429 rate-limit)', schema: { type: 'integer', minimum: 1 } },
  'X-RateLimit-Limit': { description: 'Requests admitted per 60-second window (the tier quota or the throttle)', schema: { type: 'integer', minimum: 0 } },
  'X-RateLimit-Remaining': { description: 'Requests left in the window', schema: { type: 'integer', minimum: 0 } },
  'X-RateLimit-Reset': { description: 'Unix epoch seconds when the oldest request in the window ages out', schema: { type: 'integer' } },
  'X-RateLimit-Policy': { description: 'The window: `sliding-window-60s`', schema: { type: 'string', enum: ['sliding-window-60s'] } },
} as const

/** contract D6: GET /v1/stream, a WebSocket (not an HTTP operation, so an extension beside `paths`). */
function streamDescription(): Json {
  return {
    '/v1/stream': {
      summary: 'The tenant\'s events as they are committed, over a WebSocket',
      description: 'GET /v1/stream with `Connection: Upgrade`, `Upgrade: websocket` (RFC 6455). The token (a tenant token, or a dashboard user ' +
        'token of the tenant, as the operator console sends) goes in `Authorization: Bearer <jwt>` or, where headers cannot be set (browsers), as the subprotocol pair ' +
        '`Sec-WebSocket-Protocol: bearer, <jwt>`, to which the server answers `bearer`; never in the URL. Refused ' +
        'handshakes answer a problem document (400 unknown type, 401, 403 for a suspended tenant). ' +
        'Each text message is one event envelope of the caller\'s tenant; clients send nothing. The server pings ' +
        'every 30 s, closes with 1008 when the token expires, with 1001 on shutdown, and closes a consumer that ' +
        'falls 1 MiB behind.',
      security: [{ bearer: [] }],
      parameters: [
        {
          name: 'types', in: 'query', required: false, style: 'form', explode: false,
          description: 'Only these event types (comma-separated); all of them when absent',
          schema: { type: 'array', items: { type: 'string', enum: [...EVENT_TYPES] } },
        },
        {
          name: 'Sec-WebSocket-Protocol', in: 'header', required: false,
          description: '`bearer, <jwt>`: the token, for clients that cannot send Authorization',
          schema: { type: 'string' },
        },
      ],
      responses: {
        101: { description: 'Switching Protocols; `Sec-WebSocket-Protocol: bearer` when the token came that way' },
        400: { description: 'Problem: validation (an unknown event type in `types`)', content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } } },
        401: { description: 'Problem: unauthorized', content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } } },
        403: { description: 'Problem: forbidden (the tenant is suspended)', content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } } },
      },
      messages: { $ref: '#/components/schemas/EventEnvelope' },
    },
  }
}

function operation(r: RouteDef): Json {
  const parameters: Json[] = []
  const pathNames = [...r.path.matchAll(/:([A-Za-z0-9_]+)/g)].map(m => m[1]!)
  const params = r.params ? objectProperties(plain(r.params)).props : {}
  for (const name of pathNames) parameters.push({ name, in: 'path', required: true, schema: params[name] ?? { type: 'string' } })
  if (r.query) {
    const q = objectProperties(plain(r.query))
    for (const [name, schema] of Object.entries(q.props)) parameters.push({ name, in: 'query', required: q.required.includes(name), schema })
  }
  const op: Json = {
    operationId: `${r.method.toLowerCase()}${r.path.replace(/[/:]+([a-z0-9])/gi, (_, c: string) => c.toUpperCase()).replace(/[^A-Za-z0-9]/g, '')}`,
    tags: [r.path.split('/')[2] ?? 'default'],
  }
  if (r.summary) op.summary = r.summary
  if (r.auth !== 'none') {
    op.security = [{ bearer: [] }]
    op['x-maskline-auth'] = r.roles ? { token: r.auth, roles: r.roles } : { token: r.auth }
  }
  if (parameters.length) op.parameters = parameters
  if (r.rawBody) op.requestBody = { required: true, content: { '*/*': { schema: { type: 'string' } } } }
  else if (r.body) op.requestBody = { required: true, content: { 'application/json': { schema: plain(r.body) } } }
  const responses: Json = {}
  for (const [status, schema] of Object.entries(r.response)) {
    responses[status] = schema
      ? { description: `HTTP ${status}`, content: { [r.contentType ?? 'application/json']: { schema: plain(schema) } } }
      : { description: `HTTP ${status}, empty body` }
  }
  const byStatus = new Map<number, ProblemSlug[]>()
  for (const slug of routeProblems(r)) byStatus.set(problems[slug].status, [...(byStatus.get(problems[slug].status) ?? []), slug])
  for (const [status, slugs] of byStatus) {
    if (responses[status]) continue
    responses[status] = {
      description: `Problem: ${slugs.join(', ')}`,
      ...(status === 429 ? { headers: Object.fromEntries(Object.keys(RATE_LIMIT_HEADERS).map(h => [h, { $ref: `#/components/headers/${h}` }])) } : {}),
      content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } },
    }
  }
  op.responses = responses
  return op
}

/** `stream`: the service also serves the WebSocket stream (gateway/stream), described under `x-maskline-websockets`. */
export function buildOpenApi(routes: readonly RouteDef[], opts: { baseUrl: string; version?: string; stream?: boolean }): Json {
  const paths: Record<string, Json> = {}
  for (const r of routes) {
    const p = (paths[openApiPath(r.path)] ??= {})
    p[r.method.toLowerCase()] = operation(r)
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'maskline',
      version: opts.version ?? '1',
      description: 'Number masking: masked voice and SMS between two parties through a proxy number.',
    },
    servers: [{ url: opts.baseUrl }],
    paths,
    ...(opts.stream ? { 'x-maskline-websockets': streamDescription() } : {}),
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' } },
      schemas: { Problem: plain(ProblemDocument), EventEnvelope: plain(EventEnvelopeSchema) },
      headers: RATE_LIMIT_HEADERS,
    },
  }
}
