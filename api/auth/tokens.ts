// Access tokens (contract D3): HS256 pinned, header typ JWT, iss maskline, aud per token type,
// a `typ` claim that must agree with the audience, and a kid naming the key.
//
// Signing is an HMAC with the key's pads computed once (sql/vocabulary/mac.ts) over a header
// encoded once per key (jose's SignJWT imported the key and re-encoded the header on
// every call); the result is a standard HS256 JWT, the same bytes SignJWT produces, and
// verification stays with jose (jwtVerify).
import { createHash, type KeyObject } from 'node:crypto'
import { createMac } from '../../sql/vocabulary/mac.js'
import { jwtVerify, errors as joseErrors } from 'jose'
import type { Tier } from '../../engine/types.js'
import { uuidv7, UUID_RE } from '../../sql/vocabulary/ids.js'
import { ROLES, type Role } from '../route.js'
import { MasklineError } from '../../engine/errors.js'

const ISSUER = 'maskline'
const AUDIENCE = { tenant: 'maskline:tenant', user: 'maskline:user' } as const
/** Contract 4.1/5.1/8.6: seconds. */
export const TOKEN_TTL_SECONDS = { tenant: 900, user: 86_400 } as const
const TIERS: readonly string[] = ['STARTER', 'GROWTH', 'ENTERPRISE']

export type TokenClaims =
  | { typ: 'tenant'; sub: string; tenantId: string; tier: Tier; scopes: string[] }
  | { typ: 'user'; sub: string; tenantId: string; tier: Tier; role: Role }

export interface VerifiedToken { claims: TokenClaims; expMs: number }

export class TokenError extends MasklineError {
  readonly reason: 'expired' | 'invalid'
  constructor(reason: 'expired' | 'invalid') {
    super(reason === 'expired' ? 'ML_ERR_TOKEN_EXPIRED' : 'ML_ERR_TOKEN_INVALID', reason === 'expired' ? 'token expired' : 'token invalid')
    this.reason = reason
  }
}

/** Scopes of a tenant token: the whole tenant API. A narrower set can come with scoped keys. */
export const TENANT_SCOPES = ['api'] as const

/** Key id: a short fingerprint of the key, so a rotated key can be told apart. */
export function keyId(key: Uint8Array): string {
  return createHash('sha256').update(key).digest('base64url').slice(0, 12)
}

export type TokenSigner = (claims: TokenClaims, nowMs: number, ttlSeconds?: number) => string

/** A signer for one key: the key is imported and the header encoded here, once. */
export function tokenSigner(key: Uint8Array): TokenSigner {
  const mac = createMac('sha256', key)
  const header = Buffer.from(JSON.stringify({ alg: 'HS256', typ: 'JWT', kid: keyId(key) })).toString('base64url')
  return (claims, nowMs, ttlSeconds = TOKEN_TTL_SECONDS[claims.typ]) => {
    const iat = Math.floor(nowMs / 1000)
    // The claim order of SignJWT: its payload (the claims but sub), then iss, aud, sub, iat, exp,
    // jti. Spelled out per type: a rest/spread copy of the claims was most of this function's time.
    const exp = iat + ttlSeconds, jti = uuidv7(nowMs), c = claims
    const payload = c.typ === 'tenant'
      ? { typ: c.typ, tenantId: c.tenantId, tier: c.tier, scopes: c.scopes, iss: ISSUER, aud: AUDIENCE.tenant, sub: c.sub, iat, exp, jti }
      : { typ: c.typ, tenantId: c.tenantId, tier: c.tier, role: c.role, iss: ISSUER, aud: AUDIENCE.user, sub: c.sub, iat, exp, jti }
    const input = `${header}.${Buffer.from(JSON.stringify(payload)).toString('base64url')}`
    return `${input}.${mac('base64url', input)}`
  }
}

const signers = new WeakMap<Uint8Array, TokenSigner>()

/** Signs with the signer of `key`, made on first use (the key object is the process's JWT key). */
export async function issueToken(key: Uint8Array, claims: TokenClaims, nowMs: number, ttlSeconds: number = TOKEN_TTL_SECONDS[claims.typ]): Promise<string> {
  let sign = signers.get(key)
  if (!sign) signers.set(key, sign = tokenSigner(key))
  return sign(claims, nowMs, ttlSeconds)
}

/** Verifies signature, algorithm, header typ, issuer, audience, expiry and the claim shapes. */
export async function verifyToken(key: Uint8Array | KeyObject, kid: string, token: string, nowMs: number): Promise<VerifiedToken> {
  let payload: Record<string, unknown>
  let header: { kid?: string }
  try {
    const r = await jwtVerify(token, key, {
      algorithms: ['HS256'],
      issuer: ISSUER,
      audience: [AUDIENCE.tenant, AUDIENCE.user],
      typ: 'JWT',
      currentDate: new Date(nowMs),
      requiredClaims: ['sub', 'exp', 'iat', 'jti', 'aud'],
    })
    payload = r.payload as Record<string, unknown>
    header = r.protectedHeader
  } catch (err) {
    if (err instanceof joseErrors.JWTExpired) throw new TokenError('expired')
    throw new TokenError('invalid')
  }
  if (header.kid !== kid) throw new TokenError('invalid')
  const { typ, sub, tenantId, tier, aud, exp } = payload
  if (typeof sub !== 'string' || typeof tenantId !== 'string' || !UUID_RE.test(tenantId)) throw new TokenError('invalid')
  if (typeof tier !== 'string' || !TIERS.includes(tier) || typeof exp !== 'number') throw new TokenError('invalid')
  const audList = Array.isArray(aud) ? aud : [aud]
  if (typ === 'tenant') {
    const scopes = payload.scopes
    if (audList.length !== 1 || audList[0] !== AUDIENCE.tenant) throw new TokenError('invalid')
    if (!Array.isArray(scopes) || !scopes.every(s => typeof s === 'string')) throw new TokenError('invalid')
    return { claims: { typ, sub, tenantId, tier: tier as Tier, scopes: scopes as string[] }, expMs: exp * 1000 }
  }
  if (typ === 'user') {
    const role = payload.role
    if (audList.length !== 1 || audList[0] !== AUDIENCE.user) throw new TokenError('invalid')
    if (typeof role !== 'string' || !(ROLES as readonly string[]).includes(role)) throw new TokenError('invalid')
    return { claims: { typ, sub, tenantId, tier: tier as Tier, role: role as Role }, expMs: exp * 1000 }
  }
  throw new TokenError('invalid')
}
