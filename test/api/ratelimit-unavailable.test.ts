// contract D13: a shared rate limiter that fails or hangs (Redis down or black-holed) costs a request
// at most LIMITER_TIMEOUT_MS: the tenant limit admits without headers, the credential throttles
// count on this node with the same limits (api/auth/credential-limiter.ts: the usual answer, never
// a lock-out), the warning is logged at most once a second (with a count), and decisions come
// back as soon as the limiter answers again.
import t from 'tap'
import { Type } from '@sinclair/typebox'
import { route } from '../../api/route.js'
import { LIMITER_TIMEOUT_MS, type RateDecision, type RateLimiter } from '../../api/rate-limit/limiter.js'
import { createMemoryRateLimiter } from '../../api/rate-limit/memory.js'
import { startApi, ownRoutes } from '../gateway/harness.js'

const ping = route({
  method: 'GET', path: '/t/ping', auth: 'any', response: { 200: Type.Object({ ok: Type.Boolean() }) }, problems: [],
  handler: () => ({ status: 200, body: { ok: true } }),
})

/** A limiter whose behaviour the test switches: working, throwing, or never answering. */
function switchable() {
  const real = createMemoryRateLimiter({ now: Date.now })
  const state = { mode: 'ok' as 'ok' | 'throw' | 'hang' | 'reject-late' }
  const limiter: RateLimiter = {
    hit(key, limit, windowMs): Promise<RateDecision> {
      if (state.mode === 'throw') return Promise.reject(new Error('Stream isn\'t writeable and enableOfflineQueue options is false'))
      if (state.mode === 'hang') return new Promise(() => {})
      if (state.mode === 'reject-late') return new Promise((_, reject) => setTimeout(() => reject(new Error('Command timed out')), LIMITER_TIMEOUT_MS * 2))
      return Promise.resolve(real.hit(key, limit, windowMs) as RateDecision)
    },
  }
  return { limiter, state }
}

t.test('a failing or silent limiter: tenant requests admitted at once, credential exchanges answered as usual', async t => {
  const unhandled: unknown[] = []
  const onUnhandled = (e: unknown) => { unhandled.push(e) }
  process.on('unhandledRejection', onUnhandled)
  t.teardown(() => { process.off('unhandledRejection', onUnhandled) })

  const { limiter, state } = switchable()
  const api = await startApi(t, { routes: ownRoutes([ping]), services: { rateLimiter: limiter } })
  const a = await api.signup()
  const ok = await api.get('/t/ping', { token: a.accessToken })
  t.same([ok.status, ok.headers.get('x-ratelimit-limit')], [200, '100'], 'headers while the limiter works')

  for (const mode of ['throw', 'hang', 'reject-late'] as const) {
    state.mode = mode
    const t0 = performance.now()
    const r = await api.get('/t/ping', { token: a.accessToken })
    const ms = performance.now() - t0
    t.same([r.status, r.headers.get('x-ratelimit-limit')], [200, null], `${mode}: admitted without headers`)
    t.ok(ms < LIMITER_TIMEOUT_MS + 150, `${mode}: answered in ${ms.toFixed(0)} ms`)

    const t1 = performance.now()
    const tok = await api.post('/v1/auth/token', { body: { apiKey: a.apiKey, apiSecret: a.apiSecret } })
    t.ok(performance.now() - t1 < LIMITER_TIMEOUT_MS + 150, `${mode}: token exchange answered at once`)
    // The contract changed here (credential throttles degrade, never lock out): 200, counted on this node.
    t.same([tok.status, tok.headers.get('x-ratelimit-limit')], [200, '10'], `${mode}: token exchange answered, counted on this node`)

    const login = await api.post('/v1/auth/dashboard/login', { body: { email: a.email, password: a.password } })
    t.same([login.status, login.headers.get('x-ratelimit-limit')], [200, '5'], `${mode}: dashboard login answered, counted on this node`)
  }

  state.mode = 'throw'
  const before = api.logLines().filter(l => l.code === 'rate-limiter').length
  await Promise.all(Array.from({ length: 60 }, () => api.get('/t/ping', { token: a.accessToken })))
  const warnings = api.logLines().filter(l => l.code === 'rate-limiter')
  t.ok(warnings.length - before <= 2, `60 failing requests: ${warnings.length - before} warning line(s), not one each`)
  t.match(warnings[0], { level: 40, error: { type: 'Error' }, undecided: Number })

  state.mode = 'ok'
  await new Promise(r => setTimeout(r, LIMITER_TIMEOUT_MS * 3)) // the late rejection arrives meanwhile
  const back = await api.get('/t/ping', { token: a.accessToken })
  t.same([back.status, back.headers.get('x-ratelimit-policy')], [200, 'sliding-window-60s'], 'headers are back with the limiter')
  t.ok(api.logLines().some(l => l.code === 'rate-limiter-back'), 'the recovery is logged')
  const tok = await api.post('/v1/auth/token', { body: { apiKey: a.apiKey, apiSecret: a.apiSecret } })
  t.equal(tok.status, 200, 'token exchange works again')
  t.same(unhandled, [], 'no unhandled rejection')
})
