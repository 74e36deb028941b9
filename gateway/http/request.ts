// A request's ApiRequest (gateway/http/app.ts runs the pipeline): the JSON body parsed within its
// bounds (nesting, clean UTF-8 text), query and path parameters validated against the route's
// schemas; any invalid field is a 400/422 problem naming every field at once.
import { ApiProblem, type ApiRequest, type AuthContext } from '../../api/route.js'
import type { FieldIssue } from '../../api/problems.js'
import type { Services } from '../../api/services.js'
import { hasUnicodeEscape, isUtf8, uncleanTextAt, UNCLEAN_TEXT_DETAIL } from '../../api/text-guard.js'
import { formFromPairs, type FormPair } from '../../api/cpaas/form.js'
import { jsonNestsDeeper, MAX_JSON_DEPTH } from './body.js'
import type { Captured } from './capture.js'
import type { CompiledRoute } from './compile.js'
import { parseQuery } from './query.js'
import { toFieldIssues } from './validation-errors.js'
import { JSON_TYPE } from './reply.js'

/** What building a request needs of the app's environment. */
export interface RequestEnv { services: Services }

export function buildRequest(env: RequestEnv, r: CompiledRoute, c: Captured, raw: Buffer | null, auth: AuthContext | null, pairs: readonly FormPair[] | null | undefined): ApiRequest {
  const def = r.def
  const slug = r.validationSlug
  const issues: FieldIssue[] = []
  let body: unknown = undefined
  if (r.validateBody && raw) {
    const ct = c.headers['content-type']
    if (raw.length > 0 && !isJson(ct)) throw new ApiProblem('unsupported-media-type', 'Send the body as application/json')
    if (raw.length === 0) body = {}
    else {
      // contract D13: nesting bounded before parsing; NUL, lone surrogates, invalid UTF-8 refused.
      if (jsonNestsDeeper(raw)) throw new ApiProblem(slug, `The body nests deeper than ${MAX_JSON_DEPTH} levels`)
      if (!isUtf8(raw)) throw uncleanText(slug, 'body')
      try {
        body = JSON.parse(raw.toString('utf8'))
      } catch {
        throw new ApiProblem(slug, 'The body is not valid JSON')
      }
      const at = hasUnicodeEscape(raw) ? uncleanTextAt(body) : null
      if (at !== null) throw uncleanText(slug, at || 'body')
    }
    if (!r.validateBody(body)) issues.push(...toFieldIssues(r.validateBody.errors, 'body'))
  }
  let query: Record<string, unknown> = {}
  if (r.validateQuery) {
    const parsed = parseQuery(c.rawQuery)
    if (!parsed) throw new ApiProblem(slug, 'The query string is malformed')
    query = parsed
    if (!r.validateQuery(query)) issues.push(...toFieldIssues(r.validateQuery.errors))
  }
  const params: Record<string, unknown> = c.params
  if (r.validateParams && !r.validateParams(params)) issues.push(...toFieldIssues(r.validateParams.errors))
  if (issues.length) throw new ApiProblem(slug, 'The request has invalid fields', { errors: issues })
  return {
    body: def.rawBody ? raw : body,
    rawBody: raw,
    query,
    params,
    headers: c.headers,
    path: c.path,
    rawQuery: c.rawQuery,
    ip: c.ip,
    auth,
    services: env.services,
    form: pairs ? formFromPairs(pairs) : null,
  }
}

function uncleanText(slug: 'validation' | 'validation-error', field: string): ApiProblem {
  return new ApiProblem(slug, UNCLEAN_TEXT_DETAIL, { errors: [{ field, issue: 'invalid_text' }] })
}

function isJson(ct: string | undefined): boolean {
  if (!ct) return false
  const semi = ct.indexOf(';')
  const base = (semi === -1 ? ct : ct.slice(0, semi)).trim().toLowerCase()
  return base === JSON_TYPE || (base.startsWith('application/') && base.endsWith('+json'))
}
