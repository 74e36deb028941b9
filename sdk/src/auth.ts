// Where the client's bearer token comes from (contract 4.1): an API key pair traded at
// POST /v1/auth/token for a 15-minute tenant token, a dashboard login (email and password, a
// 24-hour user token), or a token the caller already holds. A traded token is renewed shortly
// before it expires, and at once when the API refuses it (401); concurrent callers share one
// exchange.
import type { BearerSource, Transport } from './http.js'
import type { DashboardLogin } from './types.js'
import { MasklineError } from './errors.js'

export type Credentials =
  | { apiKey: string; apiSecret: string }
  | { email: string; password: string }
  | { token: string }

/** Renew this long before expiry (a request in flight must not carry a token that lapses). */
const RENEW_MARGIN_MS = 60_000

/** `exp` (ms) of a JWT, read without verifying it (the service does that); undefined if absent. */
export function tokenExpiry(jwt: string): number | undefined {
  try {
    const part = jwt.split('.')[1] ?? ''
    const json = atob(part.replace(/-/g, '+').replace(/_/g, '/').padEnd(Math.ceil(part.length / 4) * 4, '='))
    const exp = (JSON.parse(json) as { exp?: unknown }).exp
    return typeof exp === 'number' ? exp * 1000 : undefined
  } catch {
    return undefined
  }
}

export class TokenSource implements BearerSource {
  private current: { token: string; expiresAt: number | undefined } | null = null
  private pending: Promise<string> | null = null
  /** The last dashboard login's answer (user, role, tenant), when the credentials are a login. */
  login: DashboardLogin | null = null

  private readonly http: Transport
  private readonly creds: Credentials | null
  private readonly now: () => number

  constructor(http: Transport, creds: Credentials | null, now: () => number = Date.now) {
    this.http = http
    this.creds = creds
    this.now = now
    if (creds && 'token' in creds) this.current = { token: creds.token, expiresAt: tokenExpiry(creds.token) }
  }

  /** Can a new token be had (a key pair or a login), or is the given one all there is? */
  get renewable(): boolean {
    return this.creds !== null && !('token' in this.creds)
  }

  /** A token good for at least RENEW_MARGIN_MS (or the fixed one); `force` trades a new one. */
  token = async (force = false): Promise<string> => {
    const c = this.current
    const fresh = c && (c.expiresAt === undefined || c.expiresAt - RENEW_MARGIN_MS > this.now())
    if (c && (!this.renewable || (fresh && !force))) return c.token
    if (!this.creds) throw new MasklineError(null, { message: 'this client has no credentials: pass apiKey and apiSecret, email and password, or token' })
    this.pending ??= this.exchange().finally(() => { this.pending = null })
    return this.pending
  }

  private async exchange(): Promise<string> {
    const creds = this.creds!
    const t0 = this.now()
    if ('apiKey' in creds) {
      const r = await this.http.request<{ accessToken: string; expiresIn: number }>({
        method: 'POST', path: '/v1/auth/token', body: { apiKey: creds.apiKey, apiSecret: creds.apiSecret }, auth: null,
        // Trading a key changes nothing: safe to repeat after a 429 of the per-key throttle.
        safe: true,
      })
      this.current = { token: r.accessToken, expiresAt: t0 + r.expiresIn * 1000 }
      return r.accessToken
    }
    if ('email' in creds) {
      const r = await this.http.request<DashboardLogin>({ method: 'POST', path: '/v1/auth/dashboard/login', body: creds, auth: null, safe: true })
      this.login = r
      this.current = { token: r.accessToken, expiresAt: tokenExpiry(r.accessToken) }
      return r.accessToken
    }
    throw new MasklineError(null, { status: 401, message: 'the token was refused and cannot be renewed' })
  }
}
