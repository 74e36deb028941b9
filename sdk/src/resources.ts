// The tenant endpoints besides sessions: config, analytics, billing, devices and presence,
// numbers, webhooks, the operator console's own reads, auth and health.
import type { Api } from './api.js'
import type { Paginated } from './paginate.js'
import { Sessions } from './sessions.js'
import type { Body, Item, Query, Reply } from './types.js'

export class ConfigApi {
  private readonly api: Api
  constructor(api: Api) { this.api = api }
  get(): Promise<Reply<'/v1/config', 'get'>> { return this.api.call('get', '/v1/config') }
  /** PATCH /v1/config: a dashboard token of an OWNER or ADMIN. */
  update(body: Body<'/v1/config', 'patch'>): Promise<Reply<'/v1/config', 'patch'>> { return this.api.call('patch', '/v1/config', { body }) }
  /** GET /v1/tenants/me. */
  tenant(): Promise<Reply<'/v1/tenants/me', 'get'>> { return this.api.call('get', '/v1/tenants/me') }
}

export class Analytics {
  private readonly api: Api
  constructor(api: Api) { this.api = api }
  usage(query?: Query<'/v1/analytics/usage', 'get'>): Promise<Reply<'/v1/analytics/usage', 'get'>> { return this.api.call('get', '/v1/analytics/usage', { query }) }
  sessionsOverTime(query?: Query<'/v1/analytics/sessions-over-time', 'get'>): Promise<Reply<'/v1/analytics/sessions-over-time', 'get'>> { return this.api.call('get', '/v1/analytics/sessions-over-time', { query }) }
  callSuccessRate(query?: Query<'/v1/analytics/call-success-rate', 'get'>): Promise<Reply<'/v1/analytics/call-success-rate', 'get'>> { return this.api.call('get', '/v1/analytics/call-success-rate', { query }) }
  calls(query?: Query<'/v1/analytics/calls', 'get'>): Promise<Reply<'/v1/analytics/calls', 'get'>> { return this.api.call('get', '/v1/analytics/calls', { query }) }
}

export class Billing {
  private readonly api: Api
  constructor(api: Api) { this.api = api }
  usage(query?: Query<'/v1/billing/usage', 'get'>): Promise<Reply<'/v1/billing/usage', 'get'>> { return this.api.call('get', '/v1/billing/usage', { query }) }
  /** Raw billing events of a period, oldest first (offset paging: `limit`, `offset`). */
  events(query?: Query<'/v1/billing/events', 'get'>): Promise<Reply<'/v1/billing/events', 'get'>> { return this.api.call('get', '/v1/billing/events', { query }) }
  periods(query?: Query<'/v1/billing/periods', 'get'>): Paginated<Item<'/v1/billing/periods'>> { return this.api.list('/v1/billing/periods', query) }
  pricing(): Promise<Reply<'/v1/billing/pricing', 'get'>> { return this.api.call('get', '/v1/billing/pricing') }
}

export class Devices {
  private readonly api: Api
  constructor(api: Api) { this.api = api }
  /** POST /v1/devices/token: register a push token. */
  registerToken(body: Body<'/v1/devices/token', 'post'>): Promise<void> { return this.api.call('post', '/v1/devices/token', { body }) }
  /** DELETE /v1/devices/token. */
  removeToken(body: Body<'/v1/devices/token', 'delete'>): Promise<void> { return this.api.call('delete', '/v1/devices/token', { body }) }
  /** POST /v1/devices/presence. */
  setPresence(body: Body<'/v1/devices/presence', 'post'>): Promise<void> { return this.api.call('post', '/v1/devices/presence', { body }) }
  /** GET /v1/devices/presence. */
  presence(userPhone: string): Promise<Reply<'/v1/devices/presence', 'get'>> { return this.api.call('get', '/v1/devices/presence', { query: { userPhone } }) }
}

export class Numbers {
  private readonly api: Api
  constructor(api: Api) { this.api = api }
  pool(): Promise<Reply<'/v1/numbers/pool', 'get'>> { return this.api.call('get', '/v1/numbers/pool') }
  /** POST /v1/numbers/provision (the service answers 501: numbers are configured, not bought). */
  provision(body: Body<'/v1/numbers/provision', 'post'>): Promise<Reply<'/v1/numbers/provision', 'post'>> { return this.api.call('post', '/v1/numbers/provision', { body }) }
}

export class Webhooks {
  private readonly api: Api
  constructor(api: Api) { this.api = api }
  /** POST /v1/webhooks: register the endpoint; the answer carries its signing secret, once. */
  create(body: Body<'/v1/webhooks', 'post'>): Promise<Reply<'/v1/webhooks', 'post'>> { return this.api.call('post', '/v1/webhooks', { body }) }
  list(): Promise<Reply<'/v1/webhooks', 'get'>> { return this.api.call('get', '/v1/webhooks') }
  /** POST /v1/webhooks/test: a signed test delivery to the registered endpoint. */
  test(): Promise<Reply<'/v1/webhooks/test', 'post'>> { return this.api.call('post', '/v1/webhooks/test') }
  logs(query?: Query<'/v1/webhooks/logs', 'get'>): Paginated<Item<'/v1/webhooks/logs'>> { return this.api.list('/v1/webhooks/logs', query) }
}

/** The operator console's API (/v1/console/*): the tenant endpoints it reads, for dashboard tokens. */
export class ConsoleApi {
  readonly sessions: Omit<Sessions, 'create' | 'verify'>
  readonly numbers: Pick<Numbers, 'pool'>
  readonly webhooks: Omit<Webhooks, 'create'>

  private readonly api: Api

  constructor(api: Api) {
    this.api = api
    const mirrored = api.under('/v1/console')
    this.sessions = new Sessions(mirrored)
    this.numbers = new Numbers(mirrored)
    this.webhooks = new Webhooks(mirrored)
  }

  overview(query?: Query<'/v1/console/overview', 'get'>): Promise<Reply<'/v1/console/overview', 'get'>> { return this.api.call('get', '/v1/console/overview', { query }) }
  timeline(id: string): Promise<Reply<'/v1/console/sessions/{id}/timeline', 'get'>> { return this.api.call('get', '/v1/console/sessions/{id}/timeline', { params: { id } }) }
}

export class Auth {
  private readonly api: Api
  constructor(api: Api) { this.api = api }
  /** POST /v1/auth/token: trade a key pair for a tenant token (the client does this itself). */
  exchange(body: Body<'/v1/auth/token', 'post'>): Promise<Reply<'/v1/auth/token', 'post'>> { return this.api.call('post', '/v1/auth/token', { body, public: true }) }
  /** POST /v1/auth/signup: a new tenant and its OWNER; the answer carries the API key pair, once. */
  signup(body: Body<'/v1/auth/signup', 'post'>): Promise<Reply<'/v1/auth/signup', 'post'>> { return this.api.call('post', '/v1/auth/signup', { body, public: true }) }
  /** POST /v1/auth/dashboard/login. */
  login(body: Body<'/v1/auth/dashboard/login', 'post'>): Promise<Reply<'/v1/auth/dashboard/login', 'post'>> { return this.api.call('post', '/v1/auth/dashboard/login', { body, public: true }) }
  /** POST /v1/auth/rotate-key (OWNER dashboard token): the old key stops working at once. */
  rotateKey(): Promise<Reply<'/v1/auth/rotate-key', 'post'>> { return this.api.call('post', '/v1/auth/rotate-key') }
}

export class Health {
  private readonly api: Api
  constructor(api: Api) { this.api = api }
  live(): Promise<Reply<'/v1/health', 'get'>> { return this.api.call('get', '/v1/health', { public: true }) }
  ready(): Promise<Reply<'/v1/health/ready', 'get'>> { return this.api.call('get', '/v1/health/ready', { public: true }) }
  cpaas(): Promise<Reply<'/v1/health/cpaas', 'get'>> { return this.api.call('get', '/v1/health/cpaas', { public: true }) }
}

export class TwilioProxyCredentials {
  private readonly api: Api
  constructor(api: Api) { this.api = api }
  /** GET /v1/twilio-proxy/credentials (OWNER dashboard token): the façade's account SID, null before one is issued. */
  get(): Promise<Reply<'/v1/twilio-proxy/credentials', 'get'>> { return this.api.call('get', '/v1/twilio-proxy/credentials') }
  /** POST /v1/twilio-proxy/credentials (OWNER dashboard token): a new auth token (shown once) for the account SID; the old one stops working. */
  issue(): Promise<Reply<'/v1/twilio-proxy/credentials', 'post'>> { return this.api.call('post', '/v1/twilio-proxy/credentials') }
  /** POST /v1/twilio-proxy/api-keys (OWNER): an SK… key and its secret (shown once), for twilio(sid, secret, { accountSid }). */
  createApiKey(): Promise<Reply<'/v1/twilio-proxy/api-keys', 'post'>> { return this.api.call('post', '/v1/twilio-proxy/api-keys') }
  /** DELETE /v1/twilio-proxy/api-keys/:sid (OWNER): the key stops working. */
  revokeApiKey(sid: string): Promise<void> { return this.api.call('delete', '/v1/twilio-proxy/api-keys/{sid}', { params: { sid } }) as Promise<void> }
}
