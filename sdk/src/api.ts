// The typed call every SDK method goes through: an endpoint named by its OpenAPI path and method
// (so its query, body and answer types are the generated ones), path parameters filled in.
import type { Body, Method, Path, Query, Reply } from './types.js'
import type { BearerSource, Transport } from './http.js'
import { Paginated, type Page } from './paginate.js'

export interface CallOptions<P extends Path, M extends Method> {
  params?: Record<string, string>
  query?: Query<P, M> | undefined
  body?: Body<P, M>
  idempotencyKey?: string | undefined
  /** No token (signup, login, health). */
  public?: boolean
}

export class Api {
  /**
   * `prefix` replaces the `/v1` of every path: `/v1/console` serves the same endpoints to
   * dashboard tokens (the operator console's API).
   */
  readonly http: Transport
  readonly auth: BearerSource
  readonly prefix: string

  constructor(http: Transport, auth: BearerSource, prefix = '/v1') {
    this.http = http
    this.auth = auth
    this.prefix = prefix
  }

  call<P extends Path, M extends Method>(method: M, path: P, o: CallOptions<P, M> = {}): Promise<Reply<P, M>> {
    const filled = (path as string).replace(/\{([A-Za-z0-9_]+)\}/g, (_, name: string) => {
      const v = o.params?.[name]
      if (v === undefined || v === '') throw new TypeError(`${path}: the path parameter ${name} is missing`)
      return encodeURIComponent(v)
    })
    return this.http.request<Reply<P, M>>({
      method: method.toUpperCase() as 'GET',
      path: this.prefix + filled.slice('/v1'.length),
      query: o.query as Record<string, unknown> | undefined,
      body: o.body,
      idempotencyKey: o.idempotencyKey,
      auth: o.public ? null : this.auth,
    })
  }

  /** A GET list as an async iterator across its pages. */
  list<P extends Path, T>(path: P, query: Record<string, unknown> | undefined, params?: Record<string, string>): Paginated<T> {
    const { after, ...rest } = (query ?? {}) as { after?: string }
    return new Paginated<T>(
      cursor => this.call('get', path, { ...(params ? { params } : {}), query: { ...rest, ...(cursor ? { after: cursor } : {}) } as Query<P, 'get'> }) as Promise<Page<T>>,
      after,
    )
  }

  /** The same endpoints under another prefix (same token). */
  under(prefix: string): Api {
    return new Api(this.http, this.auth, prefix)
  }
}
