// What a façade handler gets: the authenticated account, the parameters (form body of a POST,
// query string otherwise), the absolute base of every URL it writes, and the façade's wiring.
import type { Services } from '../services.js'
import type { ProxyAuth, ProxyAuthenticator } from './auth.js'
import type { Params } from './params.js'
import type { PinnedSessions } from './native.js'

export interface FacadeDeps {
  auth: ProxyAuthenticator
  /** PUBLIC_BASE_URL when it is set; null: each request's Host and X-Forwarded-Proto decide. */
  configuredBaseUrl: () => string | null
  /** The native session behind a façade session with two participants (api/twilio-proxy/native.ts). */
  native: PinnedSessions
  /**
   * After each successful change through the façade: what the callbacks keep in memory is read
   * again (api/twilio-proxy/intercept.ts, out-of-session.ts). `sessionsOf`: only that Service's
   * sessions or participants changed, which matters only when it has an intercept URL.
   */
  changed?: (sessionsOf?: string) => Promise<void>
  /** Sends an SMS from a proxy number through the provider (and its failover); the provider's message id. */
  sendSms?: (from: string, to: string, text: string) => Promise<string>
}

export interface Ctx {
  services: Services
  deps: FacadeDeps
  auth: ProxyAuth
  params: Params
  /** `<public base URL>/proxy/v1`. */
  base: string
  /** This request's path below /proxy (for list URLs and 404 messages), e.g. `/v1/Services`. */
  path: string
  now: number
  /** Path segments after /proxy/v1, URL-decoded. */
  segs: string[]
}

export interface Reply { status: number; body?: unknown }
