// The one catalog of problem types (style 4, contract 7). Slug, status and title live here and
// nowhere else; the gateway renders them as RFC 7807 documents.
import type { Rejection } from '../engine/rejections.js'
import { uuidv7 } from '../sql/vocabulary/ids.js'

export const problems = {
  // contract 7, in the order of its table
  unauthorized: { status: 401, title: 'Missing, malformed or expired credentials' },
  forbidden: { status: 403, title: 'Not allowed for this token' },
  // The catalog once listed 422 for the recording invariant; contract D4 settles it as 400.
  validation: { status: 400, title: 'Request validation failed' },
  'validation-error': { status: 400, title: 'Request validation failed' },
  'rate-limit': { status: 429, title: 'Too many requests' },
  'not-found': { status: 404, title: 'Resource not found' },
  conflict: { status: 409, title: 'Conflict with an existing resource' },
  'target-conflict': { status: 409, title: 'Target swap refused by session state or participant overlap' },
  'invalid-target': { status: 422, title: 'Target equals the agent number' },
  'session-end-failed': { status: 400, title: 'Session already expired or failed' },
  'no-webhook': { status: 400, title: 'No webhook URL configured' },
  'pool-exhausted': { status: 503, title: 'No proxy number can carry this session' },
  'tier-session-limit': { status: 429, title: 'Concurrent session limit of the tier reached' },
  internal: { status: 500, title: 'Internal error; retry with backoff' },
  // Pinned creates only (docs/dual-proxy.md), which the native API never makes.
  'proxy-in-use': { status: 409, title: 'A participant is already live on its pinned proxy number' },
  'proxy-unavailable': { status: 409, title: 'A pinned proxy number is not bound to nor held by this tenant' },
  // API-only slugs for HTTP-level failures contract 7 does not list.
  'method-not-allowed': { status: 405, title: 'Method not allowed on this path' },
  'payload-too-large': { status: 413, title: 'Request body too large' },
  'unsupported-media-type': { status: 415, title: 'Unsupported Content-Type' },
  // A dependency the request cannot do without is unreachable (contract D13); sent with Retry-After.
  unavailable: { status: 503, title: 'Temporarily unavailable; retry after the Retry-After delay' },
} as const satisfies Record<string, { status: number; title: string }>

export type ProblemSlug = keyof typeof problems

/** The slugs of contract 7 (the API-only ones above are extensions). Tested against docs/contract.md. */
export const SPEC_SLUGS = [
  'unauthorized', 'forbidden', 'validation', 'validation-error', 'rate-limit', 'not-found', 'conflict',
  'target-conflict', 'invalid-target', 'session-end-failed', 'no-webhook', 'pool-exhausted',
  'tier-session-limit', 'internal',
] as const satisfies readonly ProblemSlug[]

// Type-level check (style 4): every engine rejection must have a catalog entry; removing one
// from the catalog breaks the build here.
type Catalogued<T extends ProblemSlug> = T
export type EngineRejectionSlug = Catalogued<Rejection>

export interface FieldIssue { field: string; issue: string }

export interface ProblemDocument {
  type: string
  title: string
  status: number
  detail: string
  instance: string
  errors?: FieldIssue[]
}

function problemInstance(): string {
  return `urn:maskline:err:${uuidv7()}`
}

export function renderProblem(
  baseUrl: string, slug: ProblemSlug, detail?: string, errors?: FieldIssue[], instance: string = problemInstance(),
): ProblemDocument {
  const p = problems[slug]
  const doc: ProblemDocument = { type: `${baseUrl}/errors/${slug}`, title: p.title, status: p.status, detail: detail ?? p.title, instance }
  if (errors && errors.length) doc.errors = errors
  return doc
}

export function isProblemSlug(s: unknown): s is ProblemSlug {
  return typeof s === 'string' && Object.hasOwn(problems, s)
}
