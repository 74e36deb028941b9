// HTTP Basic `AC…:authToken` for /proxy (docs/twilio-proxy.md). A verified Authorization header is
// remembered for a minute, so a request costs one Map lookup after the first; a rotation on this
// node forgets the account's entries at once (another node within that minute). Then the
// tenant's request limit, as on the native API, answered 429 / 20429.
import { Recent } from '../../engine/recent.js'
import { TIER_LIMITS, type Tier } from '../../engine/types.js'
import { WINDOW_MS } from '../rate-limit/limiter.js'
import type { Services } from '../services.js'
import { accountBySid } from '../../sql/twilio-proxy.js'
import { tokenMatches } from './credentials.js'
import { authenticate, tooManyRequests } from './errors.js'

export interface ProxyAuth { tenantId: string; accountSid: string; tier: Tier; salt: Buffer }

interface Cached { accountSid: string; tenantId: string; generation: number }

const CACHE_MAX = 10_000
const CACHE_AGE_MS = 60_000
const SID = /^AC[0-9a-fA-F]{32}$/

export function createProxyAuthenticator(now: () => number) {
  const cache = new Recent<Cached>(CACHE_MAX, { maxAgeMs: CACHE_AGE_MS, now })
  const generations = new Map<string, number>()
  const generation = (sid: string) => generations.get(sid) ?? 0

  async function verify(services: Services, header: string | undefined): Promise<Cached> {
    if (!header || header.length > 512 || header.slice(0, 6).toLowerCase() !== 'basic ') throw authenticate()
    const hit = cache.get(header)
    if (hit && hit.generation === generation(hit.accountSid)) return hit
    const decoded = Buffer.from(header.slice(6).trim(), 'base64').toString('utf8')
    const colon = decoded.indexOf(':')
    const user = colon === -1 ? '' : decoded.slice(0, colon)
    const pass = colon === -1 ? '' : decoded.slice(colon + 1)
    if (!SID.test(user)) throw authenticate()
    const sid = `AC${user.slice(2).toLowerCase()}`
    const gen = generation(sid)
    const account = await accountBySid(services.db, sid)
    if (!account || !tokenMatches(services.phoneKey, pass, account.tokenMac)) throw authenticate()
    const entry = { accountSid: account.sid, tenantId: account.tenantId, generation: gen }
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
    /** The account's token changed here: its cached headers no longer count. */
    rotated(accountSid: string): void {
      generations.set(accountSid, generation(accountSid) + 1)
    },
  }
}

export type ProxyAuthenticator = ReturnType<typeof createProxyAuthenticator>
