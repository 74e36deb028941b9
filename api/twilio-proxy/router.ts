// /proxy/*: the Twilio Proxy v1 REST API on the gateway's listener. One catch-all route per method;
// this module matches the path itself, so every answer under /proxy, a 404 and a 405 included,
// is Twilio's: JSON with snake_case fields, or the classic error body.
import { Type } from '@sinclair/typebox'
import { route, type ApiReply, type ApiRequest, type HttpMethod, type RouteDef } from '../route.js'
import { toStoreError } from '../../sql/errors.js'
import { errorBody, internal, methodNotAllowed, notFound, TwilioError, unavailable } from './errors.js'
import { Params } from './params.js'
import { uuidOf } from './sid.js'
import type { Ctx, FacadeDeps, Reply } from './context.js'
import { serviceRoutes } from './service-routes.js'
import { numberRoutes } from './number-routes.js'
import { sessionRoutes } from './session-routes.js'
import { participantRoutes } from './participant-routes.js'
import { interactionRoutes } from './interaction-routes.js'

export const PROXY_PREFIX = '/proxy'

export type Handler = (c: Ctx) => Promise<Reply>
/** A path pattern (`*` matches one segment) and its handlers by method. */
export type Table = Array<[pattern: string, handlers: Partial<Record<'GET' | 'POST' | 'DELETE', Handler>>]>

const TABLE: Table = [...serviceRoutes, ...numberRoutes, ...sessionRoutes, ...participantRoutes, ...interactionRoutes]
const COMPILED = TABLE.map(([pattern, handlers]) => ({ parts: pattern.split('/'), handlers }))

function match(segs: string[]) {
  return COMPILED.find(r => r.parts.length === segs.length && r.parts.every((p, i) => p === '*' || p === segs[i]))
}

const TYPE = 'application/json; charset=utf-8'
const ANY = Type.Any()
const STATUSES = [200, 201, 400, 401, 403, 404, 405, 409, 429, 500, 502, 503] as const

function reply(status: number, body: unknown): ApiReply {
  return { status, body: JSON.stringify(body), contentType: TYPE }
}

async function handle(deps: FacadeDeps, req: ApiRequest, method: HttpMethod): Promise<ApiReply> {
  const sub = req.path.slice(PROXY_PREFIX.length) // /v1/...
  try {
    const auth = await deps.auth.authenticate(req.services, req.headers.authorization)
    const raw = sub.split('/').slice(1)
    if (raw[0] !== 'v1') throw notFound(sub)
    const segs = raw.slice(1).map(decodeSegment)
    const r = match(segs)
    if (!r) throw notFound(sub)
    const h = r.handlers[method as 'GET' | 'POST' | 'DELETE']
    if (!h) throw methodNotAllowed(method)
    const params = Params.parse(method === 'POST' ? req.rawBody : req.rawQuery)
    const out = await h({
      services: req.services, deps, auth, params, segs, path: sub, now: req.services.now(),
      base: `${publicBase(deps, req)}${PROXY_PREFIX}/v1`,
    })
    // What a change may have changed is read again before the answer (the callbacks' memory): a
    // change below a Service's Sessions changes only which of its sessions are intercepted.
    if (method !== 'GET' && out.status < 300) await deps.changed?.((segs[2] === 'Sessions' && uuidOf('KS', segs[1]!)) || undefined)
    return out.body === undefined ? { status: out.status } : reply(out.status, out.body)
  } catch (err) {
    const e = err instanceof TwilioError ? err : storeFailure(err)
    if (e.status >= 500) req.services.log.error({ code: 'twilio-proxy', status: e.status, error: err instanceof TwilioError ? undefined : err }, 'twilio proxy request failed')
    return reply(e.status, errorBody(e))
  }
}

/** Absolute URLs (the SDK follows next_page_url verbatim): PUBLIC_BASE_URL, else the request's own host. */
function publicBase(deps: FacadeDeps, req: ApiRequest): string {
  const configured = deps.configuredBaseUrl()
  if (configured) return configured
  const host = req.headers['x-forwarded-host'] ?? req.headers.host
  if (!host || !/^[A-Za-z0-9.:[\]-]{1,255}$/.test(host)) return req.services.config.publicBaseUrl
  const proto = req.headers['x-forwarded-proto']?.split(',')[0]?.trim().toLowerCase()
  return `${proto === 'https' ? 'https' : 'http'}://${host}`
}

function storeFailure(err: unknown): TwilioError {
  const slug = toStoreError(err).slug
  return slug === 'unavailable' || slug === 'retryable' ? unavailable() : internal()
}

function decodeSegment(s: string): string {
  try {
    return decodeURIComponent(s)
  } catch {
    return s
  }
}

/** The gateway routes of the façade: every method on /proxy/*. */
export function twilioProxyRoutes(deps: FacadeDeps): RouteDef[] {
  const methods: HttpMethod[] = ['GET', 'POST', 'DELETE', 'PUT', 'PATCH']
  return methods.map(method => route({
    method, path: `${PROXY_PREFIX}/*`, auth: 'none', rateLimit: false, contentType: TYPE,
    ...(method === 'POST' ? { rawBody: true, bodyLimit: 64 * 1024 } : {}),
    response: { ...Object.fromEntries(STATUSES.map(s => [s, ANY])), 204: null },
    problems: [],
    summary: 'Twilio Proxy v1 façade (docs/twilio-proxy.md)',
    // A body over the cap, refused before any handler: in Twilio's shape too.
    refusal: (status, detail) => ({ status, contentType: TYPE, body: JSON.stringify(errorBody(status === 405 ? methodNotAllowed(detail) : new TwilioError(status, 20000 + status, detail))) }),
    handler: req => handle(deps, req, method),
  }))
}
