// Authentication on the hot path (contract 4.1, 5; contract D3).
//
// jose verification costs ~25 µs, so a verified token is cached until its exp, in a bounded
// two-generation map (engine/recent.ts): a repeat request costs one Map lookup and one string
// compare. The map is keyed by the token's signature segment (43 characters), and a hit counts only
// when the whole text equals the token jose verified: keyed by the whole text (~470 characters for
// a tenant token), V8 hashed every character of each request's fresh string (a cached
// authenticate() took 1.4-1.8 µs, now 0.6-0.8). (It used to be keyed by the token's SHA-256, ~3 µs
// a request, 8 % of a session read's CPU in the bench; that protected nothing, as the key that
// signs every token lives in the same heap.)
//
// Tenant status and tier, and the API credentials of a token exchange, come from the tenant
// directory (api/app/tenant-directory.ts): in memory, kept current on every node
// (a suspension or a key rotation applies at once here and, through the bus, on the other nodes),
// so neither a request nor a token exchange asks Postgres unless the tenant or key is new here.
import { createSecretKey } from 'node:crypto'
import { Recent } from '../../engine/recent.js'
import type { Tier } from '../../engine/types.js'
import type { TenantStatus } from '../../sql/tenants.js'
import { ApiProblem, type AuthContext, type AuthKind, type Role } from '../route.js'
import { secretMatches } from './credentials.js'
import { keyId, tokenSigner, TENANT_SCOPES, TokenError, verifyToken, type TokenClaims } from './tokens.js'

const TOKEN_CACHE_MAX = 10_000
const JWT_RE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/
const MAX_TOKEN_LENGTH = 4096

/** What authentication needs of a tenant. */
export interface TenantMeta { id: string; status: TenantStatus; tier: Tier; salt: Buffer }

/** A live API credential: the tenant of an apiKey hash and the MAC of its secret (api/auth/credentials.ts). */
export interface CredentialEntry { id: string; tenantId: string; secretMac: Buffer }

/** The tenant directory as the authenticator reads it (api/app/tenant-directory.ts implements it). */
export interface AuthDirectory {
  /** Synchronous: the tenant when it is in memory and current; undefined otherwise (then tenant()). */
  peekTenant(id: string): TenantMeta | undefined
  tenant(id: string): Promise<TenantMeta | null>
  /** The live credential of an apiKey hash (null: none), synchronously when in memory. */
  credential(keyHash: Buffer): CredentialEntry | null | Promise<CredentialEntry | null>
  /** A tenant or its keys changed through this node: forget what is held, reload. */
  changed(t: { id: string }): void
}

interface CachedToken { token: string; claims: TokenClaims; expMs: number; ctx: AuthContext | null }

/** The cache key of a token: its signature segment (all of it when it has no dot). */
const cacheKey = (token: string): string => token.slice(token.lastIndexOf('.') + 1)

export type Exchange = { accessToken: string } | 'unauthorized' | 'suspended'

export interface Authenticator {
  /**
   * Authorization header → context, or ApiProblem 401/403. Synchronous on a cache hit (the hot
   * path), so it may throw as well as reject: call it as `await auth.authenticate(...)` in a try.
   */
  authenticate(authorization: string | undefined, kind: Exclude<AuthKind, 'none'>, roles?: readonly Role[]): AuthContext | Promise<AuthContext>
  /** A bare token (e.g. from a WebSocket subprotocol) → context, same rules. */
  authenticateToken(token: string, kind: Exclude<AuthKind, 'none'>, roles?: readonly Role[]): AuthContext | Promise<AuthContext>
  /** Status, tier and salt of a tenant, from the directory. */
  tenant(tenantId: string): Promise<TenantMeta | null>
  /** A tenant or its credentials changed through this node (config, signup, rotation): applies at once. */
  changed(tenantId: string): void
  /** POST /v1/auth/token: an apiKey hash and a secret → a tenant token (contract 4.1). */
  exchange(keyHash: Buffer, apiSecret: string): Exchange | Promise<Exchange>
  /** Signs a token with the service key (no key import per call). */
  sign(claims: TokenClaims): string
}

export interface AuthenticatorOptions {
  jwtSecret: Uint8Array
  now(): number
  /** The tenant directory (api/app/tenant-directory.ts; tests: test/support/auth-directory.ts). */
  directory: AuthDirectory
  /** Server key of the API-secret MACs (contract D3); required for exchange(). */
  phoneKey?: Buffer
  tokenCacheMax?: number
}

const unauthorized = (detail: string) => new ApiProblem('unauthorized', detail, { headers: { 'www-authenticate': 'Bearer realm="maskline"' } })

export function createAuthenticator(o: AuthenticatorOptions): Authenticator {
  const kid = keyId(o.jwtSecret)
  const verifyKey = createSecretKey(o.jwtSecret)
  const signToken = tokenSigner(o.jwtSecret)
  const directory = o.directory
  const tokens = new Recent<CachedToken>(o.tokenCacheMax ?? TOKEN_CACHE_MAX)

  /** The cached verification of a token, or the promise of verifying it. */
  function verified(token: string): CachedToken | Promise<CachedToken> {
    const key = cacheKey(token)
    const hit = tokens.get(key)
    // Another text with a known signature segment (a forged payload) is not a hit: jose judges it.
    if (hit && hit.token === token) {
      if (hit.expMs <= o.now()) throw unauthorized('The access token has expired') // ages out of the map
      return hit
    }
    // Only a token jose accepted is ever cached, so the shape is checked on a miss only.
    if (!JWT_RE.test(token)) throw unauthorized('The access token is malformed')
    return verifyToken(verifyKey, kid, token, o.now()).then(v => {
      const entry: CachedToken = { token, claims: v.claims, expMs: v.expMs, ctx: null }
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
    // contract 5.3: the token types are not interchangeable.
    if (kind === 'tenant' && c.typ !== 'tenant') throw new ApiProblem('forbidden', 'This endpoint needs a tenant (API key) token')
    if (kind === 'user' && c.typ !== 'user') throw new ApiProblem('forbidden', 'This endpoint needs a dashboard user token')
    if (roles && c.typ === 'user' && !roles.includes(c.role)) throw new ApiProblem('forbidden', `This endpoint needs the role ${roles.join(' or ')}`)
    let ctx = entry.ctx
    if (!ctx || ctx.tier !== meta.tier) ctx = entry.ctx = contextOf(c, meta.tier)
    return ctx
  }

  function authenticateToken(token: string, kind: Exclude<AuthKind, 'none'>, roles?: readonly Role[]): AuthContext | Promise<AuthContext> {
    if (token.length > MAX_TOKEN_LENGTH) throw unauthorized('The access token is malformed')
    const entry = verified(token)
    if (entry instanceof Promise) return entry.then(e => directory.tenant(e.claims.tenantId).then(meta => admit(e, meta, kind, roles)))
    // The hot path: a cached token of a tenant the directory holds, no await at all.
    const t = directory.peekTenant(entry.claims.tenantId)
    if (t) return admit(entry, t, kind, roles)
    return directory.tenant(entry.claims.tenantId).then(meta => admit(entry, meta, kind, roles))
  }

  function issueFor(cred: CredentialEntry, meta: TenantMeta | null): Exchange {
    if (!meta) return 'unauthorized'
    if (meta.status !== 'ACTIVE') return 'suspended'
    return { accessToken: signToken({ typ: 'tenant', sub: cred.id, tenantId: cred.tenantId, tier: meta.tier, scopes: [...TENANT_SCOPES] }, o.now()) }
  }

  function exchangeWith(cred: CredentialEntry | null, apiSecret: string): Exchange | Promise<Exchange> {
    // The secret is 256 random bits, stored as an HMAC-SHA256 under a server key (contract D3):
    // one HMAC (~2 µs) and a constant-time compare of two 32-byte digests decide, so there is no
    // slow KDF to amortize and nothing to cache about the secret. An unknown key costs the same
    // HMAC, so timing does not tell an unknown key from a wrong secret.
    if (!o.phoneKey) throw new Error('createAuthenticator: phoneKey is required for token exchange')
    const ok = secretMatches(o.phoneKey, apiSecret, cred?.secretMac ?? NO_MAC)
    if (!cred || !ok) return 'unauthorized'
    const meta = directory.peekTenant(cred.tenantId)
    return meta ? issueFor(cred, meta) : directory.tenant(cred.tenantId).then(m => issueFor(cred, m))
  }

  return {
    authenticateToken,
    authenticate(authorization, kind, roles) {
      if (!authorization) throw unauthorized('Missing Authorization header')
      const space = authorization.indexOf(' ')
      if (space !== 6 || authorization.slice(0, 6).toLowerCase() !== 'bearer') throw unauthorized('The Authorization header must be "Bearer <token>"')
      return authenticateToken(authorization.slice(7).trim(), kind, roles)
    },
    tenant: id => directory.tenant(id),
    changed: id => directory.changed({ id }),
    exchange(keyHash, apiSecret) {
      const cred = directory.credential(keyHash)
      return cred instanceof Promise ? cred.then(c => exchangeWith(c, apiSecret)) : exchangeWith(cred, apiSecret)
    },
    sign: claims => signToken(claims, o.now()),
  }
}

/** Compared against when the key is unknown: a MAC no secret produces in practice. */
const NO_MAC = Buffer.alloc(32)

// The tier in force is the tenant's current one, not the one minted into the token.
function contextOf(c: TokenClaims, tier: Tier): AuthContext {
  return c.typ === 'tenant'
    ? { typ: 'tenant', tenantId: c.tenantId, tier, scopes: c.scopes, sub: c.sub }
    : { typ: 'user', tenantId: c.tenantId, tier, role: c.role, sub: c.sub }
}
