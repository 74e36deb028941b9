// HTTP Basic `AC…:authToken` (or `SK…:secret`) for /proxy (docs/twilio-proxy.md). A verified Authorization header is
// remembered for a minute, so a request costs one Map lookup after the first; a rotation on this
// node forgets the account's entries at once (another node within that minute). Then the
// tenant's request limit, as on the native API, answered 429 / 20429.
import { Recent } from '../../engine/recent.js'
import { TIER_LIMITS, type Tier } from '../../engine/types.js'
import { WINDOW_MS } from '../rate-limit/limiter.js'
import type { Services } from '../services.js'
import { accountBySid, accountOfTenant, apiKeyBySid } from '../../sql/twilio-proxy.js'
import { tokenMatches } from './credentials.js'
import { authenticate, tooManyRequests } from './errors.js'

export interface ProxyAuth { tenantId: string; accountSid: string; tier: Tier; salt: Buffer }

/** `credential`: the AC or SK SID the header named (a rotation or revocation bumps its generation). */
interface Cached { accountSid: string; tenantId: string; generation: number; credential: string }

async function byAccount(services: Services, sid: string, token: string) {
  const account = await accountBySid(services.db, sid)
  return account && tokenMatches(services.phoneKey, token, account.tokenMac) ? account : null
}

/** An API key's secret is checked like a token; the account is the tenant's. */
async function byApiKey(services: Services, sid: string, secret: string) {
  const key = await apiKeyBySid(services.db, sid)
  if (!key || !tokenMatches(services.phoneKey, secret, key.secretMac)) return null
  return accountOfTenant(services.db, key.tenantId)
}

const CACHE_MAX = 10_000
const CACHE_AGE_MS = 60_000
const SID = /^(AC|SK)[0-9a-fA-F]{32}$/

export function createProxyAuthenticator(now: () => number) {
  const cache = new Recent<Cached>(CACHE_MAX, { maxAgeMs: CACHE_AGE_MS, now })
  const generations = new Map<string, number>()
  const generation = (sid: string) => generations.get(sid) ?? 0

  async function verify(services: Services, header: string | undefined): Promise<Cached> {
    if (!header || header.length > 512 || header.slice(0, 6).toLowerCase() !== 'basic ') throw authenticate()
    const hit = cache.get(header)
    if (hit && hit.generation === generation(hit.credential)) return hit
    const decoded = Buffer.from(header.slice(6).trim(), 'base64').toString('utf8')
    const colon = decoded.indexOf(':')
    const user = colon === -1 ? '' : decoded.slice(0, colon)
    const pass = colon === -1 ? '' : decoded.slice(colon + 1)
    if (!SID.test(user)) throw authenticate()
    const sid = `${user.slice(0, 2).toUpperCase()}${user.slice(2).toLowerCase()}`
    const gen = generation(sid)
    const account = sid.startsWith('AC') ? await byAccount(services, sid, pass) : await byApiKey(services, sid, pass)
    if (!account) throw authenticate()
    const entry = { accountSid: account.sid, tenantId: account.tenantId, generation: gen, credential: sid }
    cache.set(header, entry)
    return entry
  }

  return {
    async authenticate(services: Services, header: string | undefined): Promise<ProxyAuth> {
      const c = await verify(services, header)
      const meta = await services.authenticator.tenant(c.tenantId)
      if (!meta || meta.status !== 'ACTIVE') throw authenticate()
      const d = await Promise.resolve(services.rateLimiter.hit(`twilio:${c.tenantId}`, TIER_LIMITS[meta.tier].requestsPerMinute, WINDOW_MS)).catch(() => null)
      if (d && !d.allowed) throw tooManyRequests()
      return { tenantId: c.tenantId, accountSid: c.accountSid, tier: meta.tier, salt: meta.salt }
    },
    /** An account's token changed, or an API key was revoked, here: its cached headers no longer count. */
    rotated(sid: string): void {
      generations.set(sid, generation(sid) + 1)
    },
  }
}

export type ProxyAuthenticator = ReturnType<typeof createProxyAuthenticator>
