// Contract 4.1: token exchange, signup, dashboard login, key rotation (contract D3).
import { randomBytes } from 'node:crypto'
import { Type } from '@sinclair/typebox'
import { uuidv7 } from '../../sql/vocabulary/ids.js'
import { route, ApiProblem, type ApiRequest, type RouteDef } from '../route.js'
import { Email, Tier, UserView, Uuid, StringEnum } from '../schemas/common.js'
import { rateLimitHeaders, LOGIN_LIMIT_PER_IP, TOKEN_LIMIT_PER_KEY, WINDOW_MS } from '../rate-limit/limiter.js'
import { apiKeyHash, newCredentials } from '../auth/credentials.js'
import { burnPasswordCheck, hashPassword, verifyPassword } from '../auth/passwords.js'
import { accountKey, recordFailedSignIn, refuseLockedAccount } from '../auth/account-throttle.js'
import { credentialHit } from '../auth/credential-limiter.js'
import { TENANT_SCOPES, TOKEN_TTL_SECONDS } from '../auth/tokens.js'
import { createTenantWithOwner, findUserByEmail, rotateCredentials } from '../../sql/tenants.js'
import { notifyTenantChanged } from './config.js'
import type { Services } from '../services.js'

const ApiKey = Type.String({ pattern: '^rk_live_[0-9a-f]{48}$' })
const ApiSecret = Type.String({ pattern: '^rs_[0-9a-f]{64}$' })
const Password = Type.String({ minLength: 8, maxLength: 128 })
const NO_STORE = { 'cache-control': 'no-store' }

const TokenBody = Type.Object({ apiKey: ApiKey, apiSecret: ApiSecret })
const TokenReply = Type.Object({ accessToken: Type.String(), expiresIn: Type.Integer(), tokenType: Type.Literal('Bearer') })

// Contract 4.1: extra fields are ignored (no additionalProperties: false).
const SignupBody = Type.Object({
  companyName: Type.String({ minLength: 1, maxLength: 255 }),
  email: Email,
  password: Password,
  companySize: Type.Optional(Type.String({ maxLength: 100 })),
  useCase: Type.Optional(Type.String({ maxLength: 1000 })),
})
const SignupReply = Type.Object({ tenantId: Uuid, apiKey: Type.String(), apiSecret: Type.String(), accessToken: Type.String(), user: UserView })

const LoginBody = Type.Object({ email: Type.String({ minLength: 1, maxLength: 254 }), password: Type.String({ minLength: 1, maxLength: 128 }) })
const LoginReply = Type.Object({
  accessToken: Type.String(),
  user: UserView,
  tenant: Type.Object({ id: Uuid, name: Type.String(), tier: Tier, status: StringEnum(['ACTIVE', 'SUSPENDED']) }),
})

const RotateReply = Type.Object({ apiKey: Type.String(), apiSecret: Type.String() })

/** contract 8.4: signups per address and minute. Each costs a password hash and a tenant. */
const SIGNUP_LIMIT_PER_IP = 20

/** The address a per-address throttle counts: captured for the routes that set `clientIp`. */
function peer(req: ApiRequest): string {
  if (req.ip === null) throw new Error('this route reads the client address without clientIp: true')
  return req.ip
}

/**
 * A per-key or per-IP throttle of contract 8.4; its headers go on every answer of the route. When the
 * shared limiter cannot decide (Redis down), this node counts with the same limit
 * (api/auth/credential-limiter.ts): the answer is the usual one, never a lock-out.
 */
async function throttle(services: Services, key: string, limit: number): Promise<Record<string, string>> {
  const d = await credentialHit(services, key, limit, WINDOW_MS)
  const headers = rateLimitHeaders(d, services.now())
  if (!d.allowed) throw new ApiProblem('rate-limit', `At most ${limit} attempts per minute`, { headers })
  return headers
}

export const authRoutes: RouteDef[] = [
  route({
    method: 'POST', path: '/v1/auth/token', auth: 'none', summary: 'Trade an API key and secret for a 15-minute tenant token',
    body: TokenBody, response: { 200: TokenReply }, problems: ['validation', 'unauthorized', 'forbidden', 'rate-limit', 'unavailable'],
    async handler(req) {
      const s = req.services
      const keyHash = apiKeyHash(req.body.apiKey)
      // Keyed by the key's hash: the key itself never reaches Redis.
      const limits = await throttle(s, `token:${keyHash.toString('base64url')}`, TOKEN_LIMIT_PER_KEY)
      // The key and the tenant come from the tenant directory (memory), not Postgres (contract D4).
      const r = await s.authenticator.exchange(keyHash, req.body.apiSecret)
      if (r === 'unauthorized') throw new ApiProblem('unauthorized', 'Unknown API key or wrong secret', { headers: limits })
      if (r === 'suspended') throw new ApiProblem('forbidden', 'The tenant is suspended', { headers: limits })
      return { status: 200, headers: { ...limits, ...NO_STORE }, body: { accessToken: r.accessToken, expiresIn: TOKEN_TTL_SECONDS.tenant, tokenType: 'Bearer' } }
    },
  }),
  route({
    method: 'POST', path: '/v1/auth/signup', auth: 'none', summary: 'Create a tenant and its OWNER user',
    body: SignupBody, response: { 201: SignupReply }, problems: ['validation', 'conflict', 'rate-limit', 'unavailable'], clientIp: true,
    async handler(req) {
      const s = req.services
      const limits = await throttle(s, `signup:${peer(req)}`, SIGNUP_LIMIT_PER_IP)
      const { companyName, email, password } = req.body
      const tenantId = uuidv7(s.now())
      const userId = uuidv7(s.now())
      const credentialId = uuidv7(s.now())
      const creds = newCredentials(s.phoneKey)
      const outcome = await createTenantWithOwner(s.db, {
        tenantId, name: companyName, salt: randomBytes(32), userId, email, passwordHash: await hashPassword(password),
        credentialId, keyHash: creds.keyHash, secretMac: creds.secretMac,
      })
      if (outcome === 'conflict') throw new ApiProblem('conflict', 'The email or the company name is already in use', { headers: limits })
      await notifyTenantChanged(s, tenantId)
      const accessToken = s.authenticator.sign({ typ: 'tenant', sub: credentialId, tenantId, tier: 'STARTER', scopes: [...TENANT_SCOPES] })
      return {
        status: 201, headers: { ...limits, ...NO_STORE },
        body: { tenantId, apiKey: creds.apiKey, apiSecret: creds.apiSecret, accessToken, user: { id: userId, email, role: 'OWNER', tenantId } },
      }
    },
  }),
  route({
    method: 'POST', path: '/v1/auth/dashboard/login', auth: 'none', summary: 'Trade email and password for a 24-hour dashboard token',
    body: LoginBody, response: { 200: LoginReply }, problems: ['validation', 'unauthorized', 'forbidden', 'rate-limit', 'unavailable'], clientIp: true,
    async handler(req) {
      const s = req.services
      const limits = await throttle(s, `login:${peer(req)}`, LOGIN_LIMIT_PER_IP)
      const user = await findUserByEmail(s.db, req.body.email)
      const account = accountKey(req.body.email, user?.id ?? null)
      refuseLockedAccount(s, account) // contract 8.4: bounds guesses spread over many addresses
      const ok = user ? await verifyPassword(req.body.password, user.passwordHash) : (await burnPasswordCheck(req.body.password), false)
      if (!user || !ok) {
        await recordFailedSignIn(s, account)
        throw new ApiProblem('unauthorized', 'Wrong email or password', { headers: limits })
      }
      if (user.tenant.status !== 'ACTIVE') throw new ApiProblem('forbidden', 'The tenant is suspended', { headers: limits })
      const accessToken = s.authenticator.sign({ typ: 'user', sub: user.id, tenantId: user.tenantId, tier: user.tenant.tier, role: user.role })
      return {
        status: 200, headers: { ...limits, ...NO_STORE },
        body: { accessToken, user: { id: user.id, email: user.email, role: user.role, tenantId: user.tenantId }, tenant: user.tenant },
      }
    },
  }),
  route({
    method: 'POST', path: '/v1/auth/rotate-key', auth: 'user', roles: ['OWNER'], summary: 'Replace the API key pair; the old one stops working at once',
    response: { 200: RotateReply }, problems: ['unauthorized', 'forbidden', 'rate-limit'],
    async handler(req) {
      const s = req.services
      const tenantId = req.auth!.tenantId
      const creds = newCredentials(s.phoneKey)
      await rotateCredentials(s.db, tenantId, { credentialId: uuidv7(s.now()), keyHash: creds.keyHash, secretMac: creds.secretMac })
      // The old key is refused at once, here and (through the bus) on every other node.
      await notifyTenantChanged(s, tenantId)
      return { status: 200, headers: NO_STORE, body: { apiKey: creds.apiKey, apiSecret: creds.apiSecret } }
    },
  }),
]

