// contract 8.4: the login throttles cannot be sidestepped. X-Forwarded-For names the client only when
// the peer is a TRUSTED_PROXY (contract D1), and then its rightmost untrusted hop; and each
// account takes at most 10 failed sign-ins per 15 minutes, from any number of addresses.
import t from 'tap'
import { problems } from '../../api/problems.js'
import type { ServiceConfig } from '../../api/services.js'
import { BASE_URL, problem, startApi, type Api } from '../gateway/harness.js'
import { startTestService } from '../support/service.js'

function config(trustedProxies?: string[]): ServiceConfig {
  return { publicBaseUrl: BASE_URL, nodeId: 'test', cooldownSeconds: 900, retentionDays: 90, webhookAllowInsecure: false, ...(trustedProxies ? { trustedProxies } : {}) }
}

const login = (api: Api, email: string, password: string, xff?: string) =>
  api.post('/v1/auth/dashboard/login', { body: { email, password }, ...(xff ? { headers: { 'x-forwarded-for': xff } } : {}) })

t.test('without TRUSTED_PROXY, a new X-Forwarded-For per attempt is still one client', async t => {
  const api = await startApi(t)
  const body = { email: 'nobody@example.com', password: 'wrong password' }
  for (let i = 0; i < 5; i++) {
    const r = await api.post('/v1/auth/dashboard/login', { body, headers: { 'x-forwarded-for': `198.51.100.${i + 1}` } })
    t.equal(r.status, 401)
  }
  const r = await api.post('/v1/auth/dashboard/login', { body, headers: { 'x-forwarded-for': '198.51.100.99' } })
  t.equal(r.status, 429, 'the peer address is throttled whatever the header says')
})

t.test('with TRUSTED_PROXY, the rightmost hop that is not a trusted proxy is the client', async t => {
  const api = await startApi(t, { services: { config: config(['127.0.0.1', '10.0.0.5']) } })
  const body = { email: 'nobody@example.com', password: 'wrong password' }
  for (let i = 0; i < 5; i++) {
    const r = await api.post('/v1/auth/dashboard/login', { body, headers: { 'x-forwarded-for': `203.0.113.${i + 1}, 198.51.100.7` } })
    t.equal(r.status, 401)
  }
  const spoofed = await api.post('/v1/auth/dashboard/login', { body, headers: { 'x-forwarded-for': '203.0.113.50, 198.51.100.7' } })
  t.equal(spoofed.status, 429, 'client-written entries to the left change nothing')
  const viaSecondProxy = await api.post('/v1/auth/dashboard/login', { body, headers: { 'x-forwarded-for': '198.51.100.7, 10.0.0.5' } })
  t.equal(viaSecondProxy.status, 429, 'a trusted hop is skipped: still 198.51.100.7')
  const other = await api.post('/v1/auth/dashboard/login', { body, headers: { 'x-forwarded-for': '198.51.100.7, 198.51.100.8' } })
  t.equal(other.status, 401, 'another client is not throttled')
  const noHeader = await api.post('/v1/auth/dashboard/login', { body })
  t.equal(noHeader.status, 401, 'no header: the proxy itself is the client')
})

t.test('10 failed sign-ins lock the account for every address; successes do not count', async t => {
  const api = await startApi(t, { services: { config: config(['127.0.0.1']) } })
  const a = await api.signup()
  const b = await api.signup()
  let ip = 0
  const next = () => `198.51.100.${++ip}`
  for (let i = 0; i < 2; i++) t.equal((await login(api, a.email, a.password, next())).status, 200, 'a success')
  for (let i = 0; i < 10; i++) t.equal((await login(api, a.email.toUpperCase(), `wrong-${i}`, next())).status, 401, `failure ${i + 1}`)
  const locked = await login(api, a.email, a.password, next())
  t.equal(locked.status, 429, 'the right password from a fresh address is refused')
  t.same(locked.body, {
    ...problem('rate-limit', 429), title: problems['rate-limit'].title, instance: locked.body.instance,
    detail: 'Too many failed sign-ins for this account; at most 10 per 15 minutes',
  })
  t.equal(locked.headers.get('retry-after'), '900')
  t.equal((await login(api, b.email, b.password, next())).status, 200, 'another account is not locked')

  // An email that matches no user locks the same way: a 429 says nothing about which exist.
  for (let i = 0; i < 10; i++) t.equal((await login(api, 'ghost@example.com', 'whatever', next())).status, 401)
  t.equal((await login(api, 'ghost@example.com', 'whatever', next())).status, 429)

  api.clock.advance(15 * 60_000)
  t.equal((await login(api, a.email, a.password, next())).status, 200, 'the window ends the lock')
})

t.test('30 guesses in a minute from 30 addresses: 10 password checks, then the right one is refused', async t => {
  const api = await startApi(t, { services: { config: config(['127.0.0.1']) } })
  const a = await api.signup()
  const statuses: number[] = []
  for (let i = 0; i < 30; i++) statuses.push((await login(api, a.email, `guess-${i}`, `203.0.113.${i + 1}`)).status)
  t.equal(statuses.filter(s => s === 401).length, 10, 'ten passwords were checked')
  t.equal(statuses.filter(s => s === 429).length, 20)
  t.equal((await login(api, a.email, a.password, '203.0.113.200')).status, 429, 'the right password does not get in')
})

t.test('the whole service, on the shared limiter (Redis when TEST_REDIS_URL is set)', async t => {
  let now = Date.now()
  const api = await startTestService(t, { now: () => now })
  const a = await api.signup()
  const statuses: number[] = []
  for (let i = 0; i < 12; i++) {
    // Past the per-address limit (5 a minute) by letting its window slide; the account's holds.
    if (i % 4 === 3) now += 61_000
    statuses.push((await api.req('POST', '/v1/auth/dashboard/login', { body: { email: a.email, password: `guess-${i}` } })).status)
  }
  t.same(statuses, [401, 401, 401, 401, 401, 401, 401, 401, 401, 401, 429, 429])
  now += 61_000
  t.equal((await api.req('POST', '/v1/auth/dashboard/login', { body: { email: a.email, password: a.password } })).status, 429)
  now += 15 * 60_000
  t.equal((await api.req('POST', '/v1/auth/dashboard/login', { body: { email: a.email, password: a.password } })).status, 200)
})
