// The client: `new Maskline({ baseUrl, apiKey, apiSecret })` (a tenant's backend), `{ email,
// password }` (a dashboard login, for console-style apps) or `{ token }` (a token obtained
// elsewhere). One namespace per area of the API; every method is typed from the OpenAPI document.
import { Api } from './api.js'
import { TokenSource, type Credentials } from './auth.js'
import { MasklineError } from './errors.js'
import { Transport, type RetryOptions } from './http.js'
import { Analytics, Auth, Billing, ConfigApi, ConsoleApi, Devices, Health, Numbers, TwilioProxyCredentials, Webhooks } from './resources.js'
import { Calls, Sessions } from './sessions.js'
import { EventStream, streamUrl, type StreamOptions, type WebSocketConstructor } from './stream.js'
import type { EventType, Reply } from './types.js'

/** Without credentials only the public endpoints work (signup, login, health). */
export type MasklineOptions = { baseUrl: string } & (Credentials | Record<never, never>) & {
  /** The WebSocket class for `stream()` where there is no global one (Node 20: `import WebSocket from 'ws'`). */
  WebSocket?: WebSocketConstructor
  /** Defaults to the global fetch. */
  fetch?: typeof fetch
  /** 429 and 503 retries of safe requests (GETs, creates with an Idempotency-Key). */
  retry?: RetryOptions
  /** How the client waits before a retry (tests pass one that moves a fake clock). */
  sleep?: (ms: number) => Promise<void>
  /** The clock token expiry is judged by (epoch ms). */
  now?: () => number
}

export class Maskline {
  readonly sessions: Sessions
  readonly calls: Calls
  readonly config: ConfigApi
  readonly analytics: Analytics
  readonly billing: Billing
  readonly devices: Devices
  readonly numbers: Numbers
  /** The Twilio Proxy façade's credentials (docs/twilio-proxy.md). */
  readonly twilioProxy: TwilioProxyCredentials
  readonly webhooks: Webhooks
  readonly console: ConsoleApi
  readonly auth: Auth
  readonly health: Health
  private readonly tokens: TokenSource
  private readonly api: Api
  private readonly WS: WebSocketConstructor | undefined
  private readonly baseUrl: string

  constructor(opts: MasklineOptions) {
    const http = new Transport({ baseUrl: opts.baseUrl, ...(opts.fetch ? { fetch: opts.fetch } : {}), ...(opts.retry ? { retry: opts.retry } : {}), ...(opts.sleep ? { sleep: opts.sleep } : {}) })
    const creds: Credentials | null = 'apiKey' in opts ? { apiKey: opts.apiKey, apiSecret: opts.apiSecret }
      : 'email' in opts ? { email: opts.email, password: opts.password }
        : 'token' in opts ? { token: opts.token } : null
    this.baseUrl = http.baseUrl
    this.tokens = new TokenSource(http, creds, opts.now)
    this.api = new Api(http, this.tokens)
    this.WS = opts.WebSocket ?? (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket
    this.sessions = new Sessions(this.api)
    this.calls = new Calls(this.api)
    this.config = new ConfigApi(this.api)
    this.analytics = new Analytics(this.api)
    this.billing = new Billing(this.api)
    this.devices = new Devices(this.api)
    this.numbers = new Numbers(this.api)
    this.twilioProxy = new TwilioProxyCredentials(this.api)
    this.webhooks = new Webhooks(this.api)
    this.console = new ConsoleApi(this.api)
    this.auth = new Auth(this.api)
    this.health = new Health(this.api)
  }

  /** The current bearer token (traded or renewed first when needed). */
  token(): Promise<string> {
    return this.tokens.token()
  }

  /** The dashboard login's answer (user, role, tenant) once a client built with email and password has logged in. */
  get login(): Reply<'/v1/auth/dashboard/login', 'post'> | null {
    return this.tokens.login
  }

  /** GET /v1/openapi.json: the service's OpenAPI 3.1 document. */
  openapi(): Promise<Record<string, unknown>> {
    return this.api.call('get', '/v1/openapi.json', { public: true }) as Promise<Record<string, unknown>>
  }

  /**
   * The tenant's events, live, across reconnects: `for await (const item of client.stream({ types: ['session.created'] }))`.
   * Yields `{ kind: 'event', event }`, and `{ kind: 'resync_required' }` when missed events are gone.
   */
  stream<T extends EventType = EventType>(opts: StreamOptions<T> = {}): EventStream<T> {
    if (!this.WS) throw new MasklineError(null, { message: 'no WebSocket class: pass { WebSocket } (in Node 20, from the ws package)' })
    return new EventStream<T>(streamUrl(this.baseUrl), this.tokens, this.WS, opts)
  }
}
