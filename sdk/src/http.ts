// One request to the API: the bearer token, JSON in and out, problems as MasklineError, and the
// bounded retry of contract 8's 429 and 503 answers after their Retry-After. A request is retried
// only when repeating it cannot do anything twice: a GET, or a create sent with an
// Idempotency-Key (POST /v1/sessions honours one: a retry with the same key and body returns the
// first answer and creates nothing).
import { MasklineError, problemOf } from './errors.js'

export interface RetryOptions {
  /** Retries after the first attempt (default 3). */
  maxRetries?: number
  /** Total time spent waiting on Retry-After across the retries of one call (default 60 s). */
  maxWaitMs?: number
}

export interface TransportOptions {
  baseUrl: string
  fetch?: typeof fetch
  retry?: RetryOptions
  /** How to wait (Retry-After, stream backoff); defaults to setTimeout. */
  sleep?: (ms: number) => Promise<void>
  /** Extra headers on every request (e.g. a User-Agent where the platform allows one). */
  headers?: Record<string, string>
}

export interface RequestSpec {
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE'
  /** With path parameters filled in. */
  path: string
  query?: Record<string, unknown> | undefined
  body?: unknown
  /** Sent as Idempotency-Key; makes a POST safe to retry. */
  idempotencyKey?: string | undefined
  /** Where the bearer token comes from, or null for a public endpoint. */
  auth: BearerSource | null
  /** Repeating it cannot do anything twice (besides GETs and requests with an Idempotency-Key). */
  safe?: boolean
}

export interface BearerSource {
  /** A token; `force`: a new one (the last was refused). */
  token(force: boolean): Promise<string>
  /** Can a refused token be replaced? */
  readonly renewable: boolean
}

const RETRIABLE = new Set([429, 503])
export const defaultSleep = (ms: number): Promise<void> => new Promise(resolve => setTimeout(resolve, ms))

/** Seconds of a Retry-After header (delta-seconds or an HTTP date), or undefined. */
export function retryAfterSeconds(value: string | null, now = Date.now()): number | undefined {
  if (!value) return undefined
  if (/^\d+$/.test(value.trim())) return Number(value.trim())
  const at = Date.parse(value)
  return Number.isNaN(at) ? undefined : Math.max(0, Math.ceil((at - now) / 1000))
}

export function queryString(query: Record<string, unknown> | undefined): string {
  if (!query) return ''
  const q = new URLSearchParams()
  for (const [k, v] of Object.entries(query)) {
    if (v === undefined || v === null) continue
    q.set(k, Array.isArray(v) ? v.join(',') : String(v))
  }
  const s = q.toString()
  return s ? `?${s}` : ''
}

export class Transport {
  readonly baseUrl: string
  readonly sleep: (ms: number) => Promise<void>
  private readonly fetchFn: typeof fetch
  private readonly maxRetries: number
  private readonly maxWaitMs: number
  private readonly headers: Record<string, string>

  constructor(o: TransportOptions) {
    this.baseUrl = o.baseUrl.replace(/\/+$/, '')
    this.fetchFn = o.fetch ?? ((...args) => globalThis.fetch(...args))
    this.maxRetries = o.retry?.maxRetries ?? 3
    this.maxWaitMs = o.retry?.maxWaitMs ?? 60_000
    this.sleep = o.sleep ?? defaultSleep
    this.headers = o.headers ?? {}
  }

  async request<T>(spec: RequestSpec): Promise<T> {
    const safe = spec.safe === true || spec.method === 'GET' || spec.idempotencyKey !== undefined
    let waited = 0
    let refreshed = false
    for (let attempt = 0; ; attempt++) {
      const res = await this.send(spec, refreshed)
      if (res.ok) return res.body as T
      // A lapsed or revoked token: one fresh token, once (the request did nothing).
      if (res.status === 401 && spec.auth?.renewable && !refreshed) { refreshed = true; continue }
      const retryAfter = retryAfterSeconds(res.headers.get('retry-after'))
      const err = new MasklineError(problemOf(res.status, res.body), { status: res.status, ...(retryAfter !== undefined ? { retryAfter } : {}) })
      const waitMs = (retryAfter ?? 1) * 1000
      if (!safe || !RETRIABLE.has(res.status) || attempt >= this.maxRetries || waited + waitMs > this.maxWaitMs) throw err
      waited += waitMs
      await this.sleep(waitMs)
    }
  }

  private async send(spec: RequestSpec, forceToken: boolean): Promise<{ ok: boolean; status: number; headers: Headers; body: unknown }> {
    const headers: Record<string, string> = { accept: 'application/json', ...this.headers }
    if (spec.auth) headers.authorization = `Bearer ${await spec.auth.token(forceToken)}`
    if (spec.body !== undefined) headers['content-type'] = 'application/json'
    if (spec.idempotencyKey !== undefined) headers['idempotency-key'] = spec.idempotencyKey
    let res: Response
    let text: string
    try {
      res = await this.fetchFn(this.baseUrl + spec.path + queryString(spec.query), {
        method: spec.method, headers, ...(spec.body !== undefined ? { body: JSON.stringify(spec.body) } : {}),
      })
      text = await res.text()
    } catch (cause) {
      throw new MasklineError(null, { message: `${spec.method} ${spec.path}: ${(cause as Error)?.message ?? 'request failed'}`, cause })
    }
    let body: unknown = text
    if (text && /json/i.test(res.headers.get('content-type') ?? '')) {
      try { body = JSON.parse(text) } catch (cause) {
        throw new MasklineError(null, { status: res.status, message: `${spec.method} ${spec.path}: the answer is not JSON`, cause })
      }
    } else if (!text) body = undefined
    return { ok: res.ok, status: res.status, headers: res.headers, body }
  }
}

/** A random Idempotency-Key (a UUID where crypto.randomUUID exists, Node 20 and browsers). */
export function newIdempotencyKey(): string {
  return globalThis.crypto.randomUUID()
}
