// The credential throttles degrade, never lock out (api/auth/credential-limiter.ts): while the
// shared limiter cannot decide, this node counts token exchanges, logins, signups and failed
// sign-ins per account with the same limits; the shared limiter decides again once it answers;
// the node's fallback holds a bounded number of keys, per throttle kind.
import t from 'tap'
import type { RateDecision, RateLimiter } from '../../api/rate-limit/limiter.js'
import { createMemoryRateLimiter } from '../../api/rate-limit/memory.js'
import { credentialHit, fallbackSizes, FALLBACK_MAX_KEYS } from '../../api/auth/credential-limiter.js'
import type { Services, ServiceConfig } from '../../api/services.js'
import { BASE_URL, startApi } from '../gateway/harness.js'

/** A shared limiter the test switches off (every hit rejects, as ioredis does with Redis gone) and on. */
function switchable() {
  const real = createMemoryRateLimiter({ now: Date.now })
  const state = { down: false }
  const limiter: RateLimiter = {
    hit(key, limit, windowMs): Promise<RateDecision> {
      if (state.down) return Promise.reject(new Error('Stream isn\'t writeable and enableOfflineQueue options is false'))
      return Promise.resolve(real.hit(key, limit, windowMs) as RateDecision)
    },
  }
  return { limiter, state }
}

const config: ServiceConfig = { publicBaseUrl: BASE_URL, nodeId: 'test', cooldownSeconds: 900, retentionDays: 90, webhookAllowInsecure: false, trustedProxies: ['127.0.0.1'] }

t.test('limiter down: the usual answers, the same limits, per node; back to the shared limiter after', async t => {
  const { limiter, state } = switchable()
  const api = await startApi(t, { services: { rateLimiter: limiter, config } })
  const a = await api.signup()
  state.down = true

  const tokens = []
  for (let i = 0; i < 11; i++) tokens.push(await api.post('/v1/auth/token', { body: { apiKey: a.apiKey, apiSecret: a.apiSecret } }))
  t.same(tokens.slice(0, 10).map(r => r.status), Array(10).fill(200), '10 token exchanges a minute are answered')
  t.same([tokens[10]!.status, tokens[10]!.headers.get('x-ratelimit-limit')], [429, '10'], 'the 11th is refused: the same limit')
  t.ok(Number(tokens[10]!.headers.get('retry-after')) >= 1, 'with Retry-After')

  const login = await api.post('/v1/auth/dashboard/login', { body: { email: a.email, password: a.password }, headers: { 'x-forwarded-for': '198.51.100.1' } })
  t.equal(login.status, 200, 'dashboard login answered')
  const signup = await api.post('/v1/auth/signup', { body: { companyName: 'Down Co', email: 'down@example.com', password: 'correct horse battery' }, headers: { 'x-forwarded-for': '198.51.100.2' } })
  t.equal(signup.status, 201, 'signup answered')

  // Guessing one account's password from a new address each time: the account lock still holds.
  const guesses = []
  for (let i = 0; i < 12; i++) {
    guesses.push((await api.post('/v1/auth/dashboard/login', { body: { email: a.email, password: `guess-${i}` }, headers: { 'x-forwarded-for': `203.0.113.${i + 1}` } })).status)
  }
  t.same(guesses, [...Array(10).fill(401), 429, 429], '10 wrong guesses, then the account is locked')

  state.down = false
  const back = await api.post('/v1/auth/token', { body: { apiKey: a.apiKey, apiSecret: a.apiSecret } })
  t.same([back.status, back.headers.get('x-ratelimit-remaining')], [200, '9'], 'the shared limiter decides again (it never saw the outage\'s attempts)')
})

t.test('the fallback holds at most FALLBACK_MAX_KEYS keys per kind, the most recent ones, and sheds idle ones', async t => {
  let now = 1_000_000
  const down: RateLimiter = { hit: (_k, limit) => ({ allowed: true, limit, remaining: limit, resetAt: now, unavailable: true }) }
  const s = { rateLimiter: down, now: () => now } as unknown as Services

  // An account under attack, locked on this node.
  for (let i = 0; i < 10; i++) await credentialHit(s, 'login-account:victim', 10, 900_000)
  t.equal((await credentialHit(s, 'login-account:victim', 10, 900_000)).allowed, false, 'the account is at its limit')

  // Random API keys (free to send) past the bound: their kind is capped, the account keeps its count.
  for (let i = 0; i < FALLBACK_MAX_KEYS + 2_500; i++) await credentialHit(s, `token:${i}`, 10, 60_000)
  // Past the bound the least recently hit tenth goes at once (api/rate-limit/memory.ts), so a flood
  // costs one pass per tenth of the bound, not one per key.
  const inBound = (n: number | undefined) => n !== undefined && n <= FALLBACK_MAX_KEYS && n >= FALLBACK_MAX_KEYS * 0.9
  t.equal(fallbackSizes(s)['login-account'], 1, 'the account untouched')
  t.ok(inBound(fallbackSizes(s)['token']), `token keys capped at the bound (${fallbackSizes(s)['token']})`)
  t.equal((await credentialHit(s, 'login-account:victim', 10, 900_000)).allowed, false, 'the account is still refused')
  t.equal((await credentialHit(s, `token:${FALLBACK_MAX_KEYS + 2_499}`, 10, 60_000)).remaining, 8, 'the newest token key kept its count')
  t.equal((await credentialHit(s, 'token:0', 10, 60_000)).remaining, 9, 'the oldest token key was dropped (counts afresh)')

  // A login address hit all along stays while new ones push the bound.
  for (let i = 0; i < FALLBACK_MAX_KEYS + 100; i++) {
    await credentialHit(s, `login:10.0.${i >> 8}.${i & 255}`, 5, 60_000)
    if (i % 1_000 === 0) await credentialHit(s, 'login:198.51.100.9', 5, 60_000)
  }
  t.ok(inBound(fallbackSizes(s)['login']), `login keys capped at the bound (${fallbackSizes(s)['login']})`)
  t.equal((await credentialHit(s, 'login:198.51.100.9', 5, 60_000)).allowed, false, 'the address that kept trying keeps its count (refused at its 5 a minute)')

  // Time: once every window is over, the sweep sheds the idle keys.
  now += 60_001
  for (let i = 0; i < 1_000; i++) await credentialHit(s, 'token:fresh', 10, 60_000)
  t.ok(fallbackSizes(s)['token']! <= 1, `idle token keys swept (${fallbackSizes(s)['token']} left)`)
})
