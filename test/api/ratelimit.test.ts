// Contract 8.1/8.3: the sliding 60-second window per tenant, its headers and 429; both limiter
// implementations (in-memory, and Redis against the real server) on an injected clock.
import { randomBytes } from 'node:crypto'
import t, { type Test } from 'tap'
import fc from 'fast-check'
import { Redis } from 'ioredis'
import { sql } from 'slonik'
import { Type } from '@sinclair/typebox'
import { problems } from '../../api/problems.js'
import { route } from '../../api/route.js'
import { createMemoryRateLimiter } from '../../api/rate-limit/memory.js'
import { createRedisRateLimiter } from '../../api/rate-limit/redis.js'
import { rateLimitHeaders, type RateLimiter } from '../../api/rate-limit/limiter.js'
import { startApi, ownRoutes, problem, TestClock } from '../gateway/harness.js'

const REDIS_URL = process.env.TEST_REDIS_URL || 'redis://127.0.0.1:6379'
const T0 = 1_800_000_000_000

const ping = route({
  method: 'GET', path: '/t/ping', auth: 'any', response: { 200: Type.Object({ ok: Type.Boolean() }) }, problems: [],
  handler: () => ({ status: 200, body: { ok: true } }),
})

/** One behaviour, both implementations. */
function limiterContract(name: string, make: (t: Test, now: () => number) => Promise<RateLimiter>) {
  t.test(`${name}: sliding window`, async t => {
    let now = T0
    const l = await make(t, () => now)
    const hit = async (key = 'k') => l.hit(key, 3, 60_000)
    t.same(await hit(), { allowed: true, limit: 3, remaining: 2, resetAt: T0 + 60_000 })
    now += 10_000
    t.same(await hit(), { allowed: true, limit: 3, remaining: 1, resetAt: T0 + 60_000 }, 'reset follows the oldest request')
    now += 10_000
    t.same(await hit(), { allowed: true, limit: 3, remaining: 0, resetAt: T0 + 60_000 })
    now += 10_000
    const refused = await hit()
    t.same(refused, { allowed: false, limit: 3, remaining: 0, resetAt: T0 + 60_000 })
    t.same(rateLimitHeaders(refused, now), {
      'x-ratelimit-limit': '3', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': String((T0 + 60_000) / 1000),
      'x-ratelimit-policy': 'sliding-window-60s', 'retry-after': '30',
    })
    t.same(await hit('other'), { allowed: true, limit: 3, remaining: 2, resetAt: now + 60_000 }, 'keys are independent')
    now = T0 + 60_000
    t.same(await hit(), { allowed: true, limit: 3, remaining: 0, resetAt: T0 + 70_000 }, 'the oldest aged out; refusals were not counted')
    t.equal((await hit()).allowed, false)
    now = T0 + 80_000
    t.same(await hit(), { allowed: true, limit: 3, remaining: 1, resetAt: T0 + 120_000 }, 'two aged out at once (the cutoff is inclusive)')
  })
}

limiterContract('memory', async (_t, now) => createMemoryRateLimiter({ now }))
/** Contract 8.1 said as plainly as possible: every admission time kept, counted anew on each hit. */
function referenceLimiter(now: () => number) {
  const admitted = new Map<string, number[]>()
  return (key: string, limit: number, windowMs: number) => {
    const t = now()
    const times = (admitted.get(key) ?? []).filter(x => x > t - windowMs)
    admitted.set(key, times)
    if (times.length >= limit) return { allowed: false, limit, remaining: 0, resetAt: times[0]! + windowMs }
    times.push(t)
    return { allowed: true, limit, remaining: limit - times.length, resetAt: times[0]! + windowMs }
  }
}

t.test('memory: the same decisions as the plain sliding log, whatever the clock, keys and limits do', async t => {
  const step = fc.record({
    advance: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 500 }), fc.integer({ min: 1_000, max: 70_000 })),
    key: fc.constantFrom('a', 'b', 'c'),
    // A tier change between hits of one key (upgrade and downgrade), as the tenant limit sees it.
    limit: fc.constantFrom(1, 2, 3, 5, 8),
  })
  fc.assert(fc.property(fc.array(step, { maxLength: 300 }), fc.integer({ min: 1, max: 40 }), (steps, sweepEvery) => {
    let now = T0
    const clock = () => now
    const memory = createMemoryRateLimiter({ now: clock, sweepEvery })
    const reference = referenceLimiter(clock)
    for (const s of steps) {
      now += s.advance
      const got = memory.hit(s.key, s.limit, 60_000)
      const want = reference(s.key, s.limit, 60_000)
      if (JSON.stringify(got) !== JSON.stringify(want)) throw new Error(`at ${now - T0} ms, ${JSON.stringify(s)}: ${JSON.stringify(got)} != ${JSON.stringify(want)}`)
    }
  }), { numRuns: 500 })
  t.pass('500 random sequences agree')
})

limiterContract('redis', async (t, now) => {
  const redis = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 })
  await redis.connect()
  t.teardown(() => redis.quit().then(() => undefined))
  return createRedisRateLimiter({ redis, now, prefix: `test:rl:${randomBytes(6).toString('hex')}:` })
})

t.test('redis: atomic across nodes, keys expire with the window', async t => {
  const a = new Redis(REDIS_URL)
  const b = new Redis(REDIS_URL)
  t.teardown(async () => { await a.quit(); await b.quit() })
  const prefix = `test:rl:${randomBytes(6).toString('hex')}:`
  let now = T0
  const nodeA = createRedisRateLimiter({ redis: a, now: () => now, prefix })
  const nodeB = createRedisRateLimiter({ redis: b, now: () => now, prefix })
  const results = await Promise.all(Array.from({ length: 40 }, (_, i) => (i % 2 ? nodeA : nodeB).hit('tenant:x', 10, 60_000)))
  t.equal(results.filter(r => r.allowed).length, 10, 'exactly the limit admitted, across two connections')
  t.same(results.filter(r => r.allowed).map(r => r.remaining).sort((x, y) => x - y), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
  const ttl = await a.pttl(`${prefix}tenant:x`)
  t.ok(ttl > 0 && ttl <= 60_000, `expires (${ttl} ms)`)
  now += 60_000
  t.equal((await nodeB.hit('tenant:x', 10, 60_000)).remaining, 9, 'a full window later the slate is clean')
})

t.test('tenant limit over HTTP: 100/min on STARTER, every token of the tenant counts', async t => {
  const api = await startApi(t, { routes: ownRoutes([ping]) })
  const a = await api.signup()
  const user = await api.login(a.email, a.password)
  const start = api.services.now()
  for (let i = 0; i < 100; i++) {
    const r = await api.get('/t/ping', { token: i % 2 ? user : a.accessToken })
    if (r.status !== 200) { t.fail(`request ${i + 1}: ${r.status}`); break }
    if (i === 0 || i === 99) {
      t.same([r.headers.get('x-ratelimit-limit'), r.headers.get('x-ratelimit-remaining'), r.headers.get('x-ratelimit-reset'), r.headers.get('x-ratelimit-policy'), r.headers.get('retry-after')],
        ['100', String(99 - i), String(Math.ceil((start + 60_000) / 1000)), 'sliding-window-60s', null], `headers of request ${i + 1}`)
    }
    if (i === 49) api.clock.advance(20_000)
  }
  api.clock.advance(15_000)
  const r = await api.get('/t/ping', { token: a.accessToken })
  t.equal(r.status, 429)
  t.same(r.body, { ...problem('rate-limit', 429), title: problems['rate-limit'].title, detail: 'At most 100 requests per minute on the STARTER tier', instance: r.body.instance })
  t.same([r.headers.get('retry-after'), r.headers.get('x-ratelimit-remaining'), r.headers.get('x-ratelimit-reset')], ['25', '0', String(Math.ceil((start + 60_000) / 1000))])
  t.equal((await api.get('/v1/config', { token: user })).status, 429, 'every route of the tenant')

  const b = await api.signup()
  t.equal((await api.get('/t/ping', { token: b.accessToken })).status, 200, 'another tenant is not affected')

  api.clock.advance(25_000) // the first 50 (at start) aged out
  const after = await api.get('/t/ping', { token: a.accessToken })
  t.equal(after.status, 200)
  t.equal(after.headers.get('x-ratelimit-remaining'), '49')
})

t.test('tenant limit follows the tier in force', async t => {
  const api = await startApi(t, { routes: ownRoutes([ping]) })
  const a = await api.signup()
  await api.db.query(sql.unsafe`UPDATE tenants SET tier = 'ENTERPRISE' WHERE id = ${a.tenantId}`)
  api.services.authenticator.changed(a.tenantId) // the directory is told (a tier change announces itself like a suspension)
  const r = await api.get('/t/ping', { token: a.accessToken })
  t.equal(r.headers.get('x-ratelimit-limit'), '2000')
})

t.test('tenant limit over HTTP with the Redis limiter', async t => {
  const redis = new Redis(REDIS_URL)
  t.teardown(() => redis.quit().then(() => undefined))
  const clock = new TestClock()
  const limiter = createRedisRateLimiter({ redis, now: clock.now, prefix: `test:rl:${randomBytes(6).toString('hex')}:` })
  const api = await startApi(t, { routes: ownRoutes([ping]), services: { rateLimiter: limiter }, clock })
  const a = await api.signup()
  const r1 = await api.get('/t/ping', { token: a.accessToken })
  t.same([r1.status, r1.headers.get('x-ratelimit-remaining')], [200, '99'])
  const r2 = await api.get('/t/ping', { token: a.accessToken })
  t.equal(r2.headers.get('x-ratelimit-remaining'), '98')
})

t.test('the tenant limiter failing admits the request (logged); the credential throttles count in the node\'s memory', async t => {
  // Up while the account is made (signup is throttled too), then down.
  let down = false
  const clock = new TestClock()
  const memory = createMemoryRateLimiter({ now: clock.now })
  const flaky: RateLimiter = { hit: (...a) => (down ? Promise.reject(new Error('ECONNREFUSED 127.0.0.1:6379')) : memory.hit(...a)) }
  const api = await startApi(t, { routes: ownRoutes([ping]), services: { rateLimiter: flaky }, clock })
  const signup = await api.post('/v1/auth/signup', { body: { companyName: 'Down Co', email: 'down@example.com', password: 'long enough' } })
  t.equal(signup.status, 201)
  down = true
  const r = await api.get('/t/ping', { token: signup.body.accessToken })
  t.equal(r.status, 200)
  t.equal(r.headers.get('x-ratelimit-limit'), null, 'no headers without a decision')
  t.match(api.logLines().find(l => l.code === 'rate-limiter'), { level: 40, error: { type: 'Error' } })
  const token = await api.post('/v1/auth/token', { body: { apiKey: signup.body.apiKey, apiSecret: signup.body.apiSecret } })
  // Contract D3: never a lock-out; the same limits are kept per node meanwhile
  // (test/api/credential-fallback.test.ts refuses the 11th exchange of a minute there).
  t.equal(token.status, 200, 'the token exchange is answered as usual')
  const again = await api.post('/v1/auth/signup', { body: { companyName: 'Down Co 2', email: 'down2@example.com', password: 'long enough' } })
  t.equal(again.status, 201, 'so is signup')
})
