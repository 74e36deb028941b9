// Bearer authentication on the hot path (spec 5, DECISIONS 3).
//
// jose verification costs ~25 µs, so a verified token is cached under the SHA-256 of its text
// (the token itself is not kept) until its exp, in an LRU bounded map: a repeat request costs a
// hash and a Map lookup. Tenant status and tier come from a separate cache with a short TTL
// (TENANT_TTL_MS): a tenant suspended in the database is refused on every node within that time,
// however long its tokens have left to live; a change made through this node applies at once.
import { createHash } from 'node:crypto'
import type { DatabasePool } from 'slonik'
import type { Tier } from '../../engine/types.js'
import { getTenantMeta, type TenantMeta } from '../../sql/tenants.js'
import { ApiProblem, type AuthContext, type AuthKind, type Role } from '../route.js'
import type { Services } from '../services.js'
import { keyId, TokenError, verifyToken, type TokenClaims } from './tokens.js'

export const TOKEN_CACHE_MAX = 10_000
export const TENANT_TTL_MS = 5_000
const TENANT_CACHE_MAX = 50_000
const JWT_RE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/
const MAX_TOKEN_LENGTH = 4096

interface CachedToken { claims: TokenClaims; expMs: number; ctx: AuthContext | null }
interface CachedTenant { meta: TenantMeta | null; at: number }

export interface Authenticator {
  /**
   * Authorization header → context, or ApiProblem 401/403. Synchronous on a cache hit (the hot
   * path), so it may throw as well as reject: call it as `await auth.authenticate(...)` in a try.
   */
  authenticate(authorization: string | undefined, kind: Exclude<AuthKind, 'none'>, roles?: readonly Role[]): AuthContext | Promise<AuthContext>
  /** A bare token (e.g. from a WebSocket subprotocol) → context, same rules. */
  authenticateToken(token: string, kind: Exclude<AuthKind, 'none'>, roles?: readonly Role[]): AuthContext | Promise<AuthContext>
  /** Status, tier and salt of a tenant, through the short-TTL cache. */
  tenant(tenantId: string): Promise<TenantMeta | null>
  /** Forget what is cached of a tenant (after a change made on this node). */
  invalidateTenant(tenantId: string): void
}

export interface AuthenticatorOptions {
  jwtSecret: Uint8Array
  now(): number
  loadTenant(id: string): Promise<TenantMeta | null>
  tokenCacheMax?: number
  tenantTtlMs?: number
}

const unauthorized = (detail: string) => new ApiProblem('unauthorized', detail, { headers: { 'www-authenticate': 'Bearer realm="maskline"' } })

export function createAuthenticator(o: AuthenticatorOptions): Authenticator {
  const kid = keyId(o.jwtSecret)
  const tokens = new Map<string, CachedToken>()
  const tenants = new Map<string, CachedTenant>()
  const loading = new Map<string, Promise<TenantMeta | null>>()
  const tokenMax = o.tokenCacheMax ?? TOKEN_CACHE_MAX
  const ttl = o.tenantTtlMs ?? TENANT_TTL_MS

  function freshTenant(id: string): CachedTenant | undefined {
    const hit = tenants.get(id)
    return hit && o.now() - hit.at < ttl ? hit : undefined
  }

  async function tenant(id: string): Promise<TenantMeta | null> {
    const hit = freshTenant(id)
    if (hit) return hit.meta
    let p = loading.get(id)
    if (!p) {
      p = o.loadTenant(id).then(meta => {
        if (tenants.size >= TENANT_CACHE_MAX) tenants.delete(tenants.keys().next().value!)
        tenants.set(id, { meta, at: o.now() })
        return meta
      }).finally(() => loading.delete(id))
      loading.set(id, p)
    }
    return p
  }

  /** The cached verification of a token, or the promise of verifying it. */
  function verified(token: string): CachedToken | Promise<CachedToken> {
    const key = createHash('sha256').update(token).digest('base64')
    const hit = tokens.get(key)
    if (hit) {
      if (hit.expMs <= o.now()) {
        tokens.delete(key)
        throw unauthorized('The access token has expired')
      }
      tokens.delete(key) // LRU: move to the young end
      tokens.set(key, hit)
      return hit
    }
    return verifyToken(o.jwtSecret, kid, token, o.now()).then(v => {
      const entry: CachedToken = { claims: v.claims, expMs: v.expMs, ctx: null }
      if (tokens.size >= tokenMax) tokens.delete(tokens.keys().next().value!)
      tokens.set(key, entry)
      return entry
    }, err => {
      if (err instanceof TokenError) throw unauthorized(err.reason === 'expired' ? 'The access token has expired' : 'The access token is not valid')
      throw err
    })
  }

  function admit(entry: CachedToken, meta: TenantMeta | null, kind: Exclude<AuthKind, 'none'>, roles?: readonly Role[]): AuthContext {
    const c = entry.claims
    if (!meta) throw unauthorized('The tenant of this token does not exist')
    if (meta.status !== 'ACTIVE') throw new ApiProblem('forbidden', 'The tenant is suspended')
    // spec 5.3: the token types are not interchangeable.
    if (kind === 'tenant' && c.typ !== 'tenant') throw new ApiProblem('forbidden', 'This endpoint needs a tenant (API key) token')
    if (kind === 'user' && c.typ !== 'user') throw new ApiProblem('forbidden', 'This endpoint needs a dashboard user token')
    if (roles && c.typ === 'user' && !roles.includes(c.role)) throw new ApiProblem('forbidden', `This endpoint needs the role ${roles.join(' or ')}`)
    let ctx = entry.ctx
    if (!ctx || ctx.tier !== meta.tier) ctx = entry.ctx = contextOf(c, meta.tier)
    return ctx
  }

  function authenticateToken(token: string, kind: Exclude<AuthKind, 'none'>, roles?: readonly Role[]): AuthContext | Promise<AuthContext> {
    if (token.length > MAX_TOKEN_LENGTH || !JWT_RE.test(token)) throw unauthorized('The access token is malformed')
    const entry = verified(token)
    if (entry instanceof Promise) return entry.then(e => tenant(e.claims.tenantId).then(meta => admit(e, meta, kind, roles)))
    // The hot path: a cached token of a tenant whose status is fresh, no await at all.
    const t = freshTenant(entry.claims.tenantId)
    if (t) return admit(entry, t.meta, kind, roles)
    return tenant(entry.claims.tenantId).then(meta => admit(entry, meta, kind, roles))
  }

  return {
    authenticateToken,
    authenticate(authorization, kind, roles) {
      if (!authorization) throw unauthorized('Missing Authorization header')
      const space = authorization.indexOf(' ')
      if (space !== 6 || authorization.slice(0, 6).toLowerCase() !== 'bearer') throw unauthorized('The Authorization header must be "Bearer <token>"')
      return authenticateToken(authorization.slice(7).trim(), kind, roles)
    },
    tenant,
    invalidateTenant(id) {
      tenants.delete(id)
    },
  }
}

// The tier in force is the tenant's current one, not the one minted into the token.
function contextOf(c: TokenClaims, tier: Tier): AuthContext {
  return c.typ === 'tenant'
    ? { typ: 'tenant', tenantId: c.tenantId, tier, scopes: c.scopes, sub: c.sub }
    : { typ: 'user', tenantId: c.tenantId, tier, role: c.role, sub: c.sub }
}

const byServices = new WeakMap<object, Authenticator>()

/** The one authenticator of a Services object (shared by the HTTP routes and the WebSocket upgrade). */
export function authenticatorOf(services: Services): Authenticator {
  let a = byServices.get(services)
  if (!a) {
    const db: DatabasePool = services.db
    a = createAuthenticator({ jwtSecret: services.jwtSecret, now: () => services.now(), loadTenant: id => getTenantMeta(db, id) })
    byServices.set(services, a)
  }
  return a
}
