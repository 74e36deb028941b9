// OpenAPI 3.1 from the route table (STYLE 5: the schemas are the single source). Every route
// appears once; problem responses are grouped by status with the slugs they can carry.
import type { TSchema } from '@sinclair/typebox'
import { problems, type ProblemSlug } from './problems.js'
import type { RouteDef } from './route.js'
import { ProblemDocument } from './schemas/common.js'

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
      content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } },
    }
  }
  op.responses = responses
  return op
}

export function buildOpenApi(routes: readonly RouteDef[], opts: { baseUrl: string; version?: string }): Json {
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
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' } },
      schemas: { Problem: plain(ProblemDocument) },
    },
  }
}
