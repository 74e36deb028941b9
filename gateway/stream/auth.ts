// Handshake authentication of the event stream (contract D6): the JWT comes in
// `Authorization: Bearer <jwt>` or, for browsers (which cannot set headers on a WebSocket), as
// the subprotocol pair `bearer, <jwt>`. Never in the URL: URLs end up in proxy and access logs.
import type { Authenticator } from '../../api/auth/authenticate.js'
import { ApiProblem, type AuthContext } from '../../api/route.js'

/** A tenant (with the token's expiry, to close the stream when it lapses), a refusal (suspended tenant), or nothing valid. */
export type StreamPrincipal = { tenantId: string; expMs?: number } | 'forbidden' | null

export interface HandshakeToken {
  token: string | null
  /** What to answer in Sec-WebSocket-Protocol: 'bearer' when the client offered it, else ''. */
  protocol: string
}

export function extractToken(authorization: string, secWebSocketProtocol: string): HandshakeToken {
  const offered = secWebSocketProtocol.split(',').map(s => s.trim()).filter(Boolean)
  const bearerAt = offered.findIndex(p => p.toLowerCase() === 'bearer')
  const protocol = bearerAt >= 0 ? 'bearer' : ''
  const m = /^Bearer[ \t]+([^\s,]+)[ \t]*$/i.exec(authorization)
  if (m) return { token: m[1]!, protocol }
  if (authorization) return { token: null, protocol } // some other scheme: not ours
  if (bearerAt >= 0 && offered[bearerAt + 1]) return { token: offered[bearerAt + 1]!, protocol }
  return { token: null, protocol }
}

/**
 * The `verifyTenantToken` the service passes to registerStream, over the API's own authenticator
 * (services.authenticator, api/auth/authenticate.ts: same JWT rules, same caches). Tenant tokens
 * and, for the operator console (README.md, Operator console), dashboard user tokens of any role are admitted
 * (contract D6): either way the socket gets its token's tenant's events only. A suspended tenant
 * is refused with 403 (contract D3), anything else invalid 401.
 */
export function streamTokenVerifier(auth: Pick<Authenticator, 'authenticateToken'>): (token: string) => StreamPrincipal | Promise<StreamPrincipal> {
  // Synchronous on the authenticator's hot path (a cached token, its tenant in memory), so the
  // stream upgrades in uWS's own callback (gateway/stream/deferred-upgrades.ts).
  return token => {
    try {
      const ctx = auth.authenticateToken(token, 'any')
      return ctx instanceof Promise ? ctx.then(c => admitted(c, token), refused) : admitted(ctx, token)
    } catch (err) {
      return refused(err)
    }
  }
}

function admitted(ctx: AuthContext, token: string): StreamPrincipal {
  return { tenantId: ctx.tenantId, expMs: expiryOf(token) }
}

/** An ApiProblem of the authenticator as the stream's answer; anything else is thrown on. */
function refused(err: unknown): StreamPrincipal {
  if (err instanceof ApiProblem) return err.slug === 'forbidden' ? 'forbidden' : null
  throw err
}

/** `exp` of a token the authenticator has just verified (so its payload is trusted), in ms. */
function expiryOf(token: string): number | undefined {
  try {
    const exp = (JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString('utf8')) as { exp?: unknown }).exp
    return typeof exp === 'number' ? exp * 1000 : undefined
  } catch {
    return undefined
  }
}
