// GET /v1/openapi.json: the document of the route table it is given, built on first request
// (so a table that includes this route lists it too).
import { Type } from '@sinclair/typebox'
import { buildOpenApi } from '../openapi.js'
import { route, type RouteDef } from '../route.js'

/** `opts.stream`: the WebSocket stream is served beside the routes (the service's app). */
export function openapiRoute(routes: readonly RouteDef[], opts: { stream?: boolean } = {}): RouteDef {
  let doc: Record<string, unknown> | null = null
  return route({
    method: 'GET', path: '/v1/openapi.json', auth: 'none', summary: 'This OpenAPI 3.1 document',
    response: { 200: Type.Object({}, { additionalProperties: true }) }, problems: [],
    handler(req) {
      doc ??= buildOpenApi(routes, { baseUrl: req.services.config.publicBaseUrl, stream: opts.stream ?? false })
      return { status: 200, body: doc }
    },
  })
}
