// Every failure the client reports is a MasklineError. An answer of the API that is not 2xx
// carries its RFC 7807 problem document (`type` ends in the slug of the service's problem
// catalog: `rate-limit`, `not-found`, `validation`, ...); a failure before any answer (network,
// timeout, a body that is not JSON) gets the slug `network` and status 0.

/** One field-level issue of a `validation` problem. */
export interface FieldIssue {
  field: string
  issue: string
}

/** The problem document the API answers with (application/problem+json). */
export interface Problem {
  type: string
  title?: string
  status: number
  detail?: string
  instance?: string
  errors?: FieldIssue[]
  [extension: string]: unknown
}

export class MasklineError extends Error {
  /** The last path segment of the problem's `type`: `rate-limit`, `not-found`, ... or `network`. */
  readonly type: string
  readonly status: number
  readonly detail: string | undefined
  readonly errors: FieldIssue[]
  /** The problem's `instance` id: the service logs it with the failure. */
  readonly instance: string | undefined
  /** The whole problem document as received (null for `network`). */
  readonly problem: Problem | null
  /** Retry-After of the answer, in seconds, when it had one. */
  readonly retryAfter: number | undefined

  constructor(problem: Problem | null, opts: { status?: number; message?: string; retryAfter?: number; cause?: unknown } = {}) {
    const status = problem?.status ?? opts.status ?? 0
    const slug = problem ? problemSlug(problem.type) : 'network'
    super(opts.message ?? problem?.detail ?? problem?.title ?? `HTTP ${status}`, opts.cause === undefined ? undefined : { cause: opts.cause })
    this.name = 'MasklineError'
    this.type = slug
    this.status = status
    this.detail = problem?.detail
    this.errors = problem?.errors ?? []
    this.instance = problem?.instance
    this.problem = problem
    this.retryAfter = opts.retryAfter
  }
}

/** `https://api.example/errors/rate-limit` → `rate-limit`. */
export function problemSlug(type: string): string {
  return type.replace(/\/+$/, '').split('/').pop() || type
}

/** The problem of a non-2xx answer, or a stand-in when the body is not one. */
export function problemOf(status: number, body: unknown): Problem {
  if (body && typeof body === 'object' && typeof (body as Problem).type === 'string') {
    const p = body as Problem
    return { ...p, status: typeof p.status === 'number' ? p.status : status }
  }
  return { type: status >= 500 ? 'internal' : 'error', status, title: `HTTP ${status}` }
}
