// The contract route modules are written against. A route is data: the gateway compiles its
// schemas at boot, authenticates, rate-limits, validates, calls the handler and serializes the
// reply through the response schema (an allow-list), so a handler cannot leak a field.
import type { Static, TSchema } from '@sinclair/typebox'
import type { Tier } from '../engine/types.js'
import type { Services } from './services.js'
import { problems, type FieldIssue, type ProblemSlug } from './problems.js'
import { MasklineError } from '../engine/errors.js'

export type { ProblemSlug } from './problems.js'

/** `any` = a tenant or a user token (contract 5.2). */
export type AuthKind = 'none' | 'tenant' | 'user' | 'any'

/** contract D3: dashboard user roles. */
export const Role = { OWNER: 'OWNER', ADMIN: 'ADMIN', OPERATOR: 'OPERATOR' } as const
export type Role = (typeof Role)[keyof typeof Role]
export const ROLES: readonly Role[] = Object.values(Role)

export type HttpMethod = 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE'

export type AuthContext =
  | { typ: 'tenant'; tenantId: string; tier: Tier; scopes: string[]; sub: string }
  | { typ: 'user'; tenantId: string; tier: Tier; role: Role; sub: string }

export interface ApiRequest<B = any, Q = any, P = any> {
  body: B
  /** The body as received; set for every route that reads a body, the only body of rawBody routes. */
  rawBody: Buffer | null
  query: Q
  params: P
  /** Lower-case names, copied out of uWS before any await. */
  headers: Record<string, string>
  /** The path without the query string. Never log it: it may carry a number. */
  path: string
  rawQuery: string
  /** The client's address (TRUSTED_PROXY applies); null unless the route sets `clientIp`. */
  ip: string | null
  auth: AuthContext | null
  services: Services
  /** The form fields of a `form` route's body, parsed once by the pipeline; null when malformed. */
  form: Record<string, string> | null
}

/**
 * A JSON body written by a serializer that emits exactly its route's response schema (a hot read:
 * GET /v1/sessions/:id of a live session). Sent as is, without the allow-list copy and
 * JSON.stringify; with checkResponses (tests) it is parsed and checked against the schema, and
 * refused if it carries a field the schema does not declare (gateway/http/app.ts replyOut).
 */
export class JsonText {
  readonly text: string
  constructor(text: string) {
    this.text = text
  }
}

export interface ApiReply {
  status: number
  body?: unknown
  headers?: Record<string, string>
  /** Default application/json (serialized through the response schema). Any other type is sent as is. */
  contentType?: string
}

export interface RouteDef {
  method: HttpMethod
  /** uWS pattern: `/v1/sessions/:id`. */
  path: string
  auth: AuthKind
  /** Roles a user token must have (tenant tokens are not role-checked). */
  roles?: readonly Role[]
  body?: TSchema
  query?: TSchema
  params?: TSchema
  /** Status → schema of the body (an allow-list), or null for an empty body. */
  response: Record<number, TSchema | null>
  problems: readonly ProblemSlug[]
  /** Slug of validation failures; contract 4.4/4.7 use 'validation-error'. Default 'validation'. */
  validationSlug?: 'validation' | 'validation-error'
  /** Body byte cap; default 16 KiB. */
  bodyLimit?: number
  /** The handler gets the raw Buffer (provider callbacks verify signatures on it); no parse, no 415. */
  rawBody?: boolean
  /** Parse the raw body as application/x-www-form-urlencoded into `req.form` (provider callbacks). */
  form?: boolean
  /**
   * A provider callback: the pipeline checks its signature on the raw body (contract D5) before
   * the handler runs, and answers `refusal` (403) when it does not verify.
   */
  signed?: { refusal: ApiReply; name: string }
  /** Default content type of replies (ApiReply.contentType wins); application/json when absent. */
  contentType?: string
  /** Count against the tenant's per-minute limit (contract 8.1). Default: true for authenticated routes. */
  rateLimit?: boolean
  /**
   * The handler reads `req.ip` (per-address throttles). Only these routes ask uWS for the peer
   * address: it comes as a new ArrayBuffer per request, ~4.6 µs of service CPU on a session read
   * (its allocation and the collector's work for it; bench/RESULTS.md, "What moved the figures", 365b23b).
   */
  clientIp?: boolean
  summary?: string
  /**
   * A surface with its own error shape (the Twilio Proxy façade): what the gateway answers itself
   * for this route (413) is written by this instead of a problem document.
   */
  refusal?: (status: number, detail: string) => ApiReply & { body: string; contentType: string }
  handler: (req: ApiRequest) => Promise<ApiReply> | ApiReply
}

type StaticOf<S> = S extends TSchema ? Static<S> : any

/** A RouteDef whose handler sees the static types of its own schemas. */
export interface TypedRouteDef<B, Q, P> extends Omit<RouteDef, 'body' | 'query' | 'params' | 'handler'> {
  body?: B
  query?: Q
  params?: P
  handler: (req: ApiRequest<StaticOf<B>, StaticOf<Q>, StaticOf<P>>) => Promise<ApiReply> | ApiReply
}

export function route<B extends TSchema | undefined = undefined, Q extends TSchema | undefined = undefined, P extends TSchema | undefined = undefined>(
  def: TypedRouteDef<B, Q, P>,
): RouteDef {
  return def as RouteDef
}

/** Throw from a handler (or anything it calls) to answer with a catalog problem. */
export class ApiProblem extends MasklineError {
  readonly slug: ProblemSlug
  readonly status: number
  readonly detail: string | undefined
  readonly errors: FieldIssue[] | undefined
  readonly headers: Record<string, string> | undefined

  constructor(slug: ProblemSlug, detail?: string, extras?: { errors?: FieldIssue[]; headers?: Record<string, string> }) {
    super('ML_ERR_PROBLEM', detail ?? problems[slug].title)
    this.slug = slug
    this.status = problems[slug].status
    this.detail = detail
    this.errors = extras?.errors
    this.headers = extras?.headers
  }
}
