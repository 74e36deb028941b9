// Sessions (contract 4.2) and calls: the endpoints under /v1/sessions and /v1/calls.
import type { Api } from './api.js'
import { newIdempotencyKey } from './http.js'
import type { Paginated } from './paginate.js'
import type { Body, Call, CreateSession, Item, Query, Reply, Session, SessionCall, Sms } from './types.js'

export class Sessions {
  private readonly api: Api
  constructor(api: Api) { this.api = api }

  /**
   * POST /v1/sessions. Sent with an Idempotency-Key (a new one unless given), so a 429 or 503 is
   * retried without the risk of a second session or a second bill.
   */
  create(body: CreateSession, opts: { idempotencyKey?: string } = {}): Promise<Session> {
    return this.api.call('post', '/v1/sessions', { body, idempotencyKey: opts.idempotencyKey ?? newIdempotencyKey() })
  }

  /** GET /v1/sessions, newest first, every page: `for await (const s of client.sessions.list({ state: 'ACTIVE' }))`. */
  list(query?: Query<'/v1/sessions', 'get'>): Paginated<Item<'/v1/sessions'>> {
    return this.api.list('/v1/sessions', query)
  }

  /** GET /v1/sessions/verify: does this number have a live session? */
  verify(userPhone: string): Promise<Reply<'/v1/sessions/verify', 'get'>> {
    return this.api.call('get', '/v1/sessions/verify', { query: { userPhone } })
  }

  get(id: string): Promise<Session> {
    return this.api.call('get', '/v1/sessions/{id}', { params: { id } })
  }

  /** PATCH /v1/sessions/:id: merge metadata, change the grace period. */
  update(id: string, body: Body<'/v1/sessions/{id}', 'patch'>): Promise<Session> {
    return this.api.call('patch', '/v1/sessions/{id}', { params: { id }, body })
  }

  /** PATCH /v1/sessions/:id/target: replace party B, keep the proxy. */
  swapTarget(id: string, customerPhone: string): Promise<Session> {
    return this.api.call('patch', '/v1/sessions/{id}/target', { params: { id }, body: { customerPhone } })
  }

  /** POST /v1/sessions/:id/end: the session enters its grace period. */
  end(id: string): Promise<Session> {
    return this.api.call('post', '/v1/sessions/{id}/end', { params: { id } })
  }

  calls(id: string, query?: Query<'/v1/sessions/{id}/calls', 'get'>): Paginated<SessionCall> {
    return this.api.list('/v1/sessions/{id}/calls', query, { id })
  }

  /** SMS records (metadata only, never the text), newest first. */
  sms(id: string, query?: Query<'/v1/sessions/{id}/sms', 'get'>): Paginated<Sms> {
    return this.api.list('/v1/sessions/{id}/sms', query, { id })
  }
}

export class Calls {
  private readonly api: Api
  constructor(api: Api) { this.api = api }

  list(query?: Query<'/v1/calls', 'get'>): Paginated<Item<'/v1/calls'>> {
    return this.api.list('/v1/calls', query)
  }

  get(id: string): Promise<Call> {
    return this.api.call('get', '/v1/calls/{id}', { params: { id } })
  }
}
