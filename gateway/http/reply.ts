// What a route's reply becomes on the wire (gateway/http/app.ts writes it): its body picked by the
// response schema's allow-list (checked against the schema in tests), or an RFC 7807 problem.
import { isDeepStrictEqual } from 'node:util'
import { renderProblem, type FieldIssue, type ProblemSlug } from '../../api/problems.js'
import { ApiProblem, JsonText, type ApiReply } from '../../api/route.js'
import { toStoreError } from '../../sql/errors.js'
import { MasklineError } from '../../engine/errors.js'
import type { CompiledRoute } from './compile.js'
import type { Outgoing } from './respond.js'

export const JSON_TYPE = 'application/json'
const PROBLEM_TYPE = 'application/problem+json'

/** What a reply needs of the app's environment. */
export interface ReplyEnv {
  services: { config: { publicBaseUrl: string } }
  /** Check every reply body against its response schema; a mismatch answers 500 (tests). */
  checkResponses: boolean
}

class UndeclaredResponse extends MasklineError {
  constructor(status: number, why: string) {
    super('ML_ERR_UNDECLARED_RESPONSE', `response ${status} ${why}`)
  }
}

export function replyOut(env: ReplyEnv, r: CompiledRoute, reply: ApiReply): Outgoing {
  const contentType = reply.contentType ?? r.def.contentType ?? JSON_TYPE
  if (!r.serializers.has(reply.status)) throw new UndeclaredResponse(reply.status, 'is not declared by the route')
  const picker = r.serializers.get(reply.status)
  if (picker === null || reply.body === undefined) {
    if (picker) throw new UndeclaredResponse(reply.status, 'has no body but declares one')
    return { status: reply.status, contentType: null, body: null, headers: [reply.headers] }
  }
  if (contentType !== JSON_TYPE) {
    if (typeof reply.body !== 'string' && !Buffer.isBuffer(reply.body)) throw new UndeclaredResponse(reply.status, 'is not JSON and not text')
    return { status: reply.status, contentType, body: reply.body, headers: [reply.headers] }
  }
  if (reply.body instanceof JsonText) {
    if (env.checkResponses) {
      const parsed: unknown = JSON.parse(reply.body.text)
      if (!r.responseChecks.get(reply.status)!(parsed)) throw new UndeclaredResponse(reply.status, 'does not match its schema')
      if (!isDeepStrictEqual(picker!(parsed), parsed)) throw new UndeclaredResponse(reply.status, 'carries a field its schema does not declare')
    }
    return { status: reply.status, contentType, body: reply.body.text, headers: [reply.headers] }
  }
  const picked = picker!(reply.body)
  if (env.checkResponses && !r.responseChecks.get(reply.status)!(picked)) throw new UndeclaredResponse(reply.status, 'does not match its schema')
  return { status: reply.status, contentType, body: JSON.stringify(picked), headers: [reply.headers] }
}

export function tooLarge(env: ReplyEnv, r: CompiledRoute): Outgoing {
  const detail = `The body may not exceed ${r.bodyLimit} bytes`
  if (!r.def.refusal) return problemOut(env, 'payload-too-large', detail)
  const own = r.def.refusal(413, detail)
  return { status: own.status, contentType: own.contentType, body: own.body, headers: [own.headers] }
}

export function problemOut(env: ReplyEnv, slug: ProblemSlug, detail?: string, errors?: FieldIssue[], headers?: Record<string, string>): Outgoing {
  // Read per answer: the service sets it once its port is bound (PORT=0 without PUBLIC_BASE_URL).
  const doc = renderProblem(env.services.config.publicBaseUrl, slug, detail, errors)
  return { status: doc.status, contentType: PROBLEM_TYPE, body: JSON.stringify(doc), headers: [headers], instance: doc.instance }
}

export function errorOut(env: ReplyEnv, err: unknown): Outgoing {
  if (err instanceof ApiProblem) return problemOut(env, err.slug, err.detail, err.errors, err.headers)
  // Postgres unreachable: say so, and when to come back, rather than 500.
  const slug = toStoreError(err).slug
  if (slug === 'unavailable' || slug === 'retryable') {
    return problemOut(env, 'unavailable', 'The database is unreachable; retry after the Retry-After delay', undefined, { 'retry-after': '2' })
  }
  // Never the message: a driver error can quote a value (contract 7: no stack or driver message).
  return problemOut(env, 'internal', 'An unexpected error occurred; retry with backoff')
}
