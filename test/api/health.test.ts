// Contract 4.11: health and provider breakers, without authentication.
import t from 'tap'
import { ownRoutes, startApi } from '../gateway/harness.js'
import { startTestService } from '../support/service.js'

const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/

// The probes as the service composes them (not a test's stand-in): Postgres pinged, Redis pinged
// when configured and 'disabled' in embedded mode, the timestamp from the service's clock.
t.test('GET /v1/health: the service pings Postgres, and Redis when configured', async t => {
  const now = Date.UTC(2026, 2, 3, 4, 5, 6, 7)
  const api = await startTestService(t, { now: () => now })
  const r = await api.req('GET', '/v1/health')
  t.equal(r.status, 200)
  t.same(r.body, {
    status: 'healthy',
    checks: { postgres: 'ok', redis: process.env.TEST_REDIS_URL ? 'ok' : 'disabled' },
    timestamp: '2026-03-03T04:05:06.007Z',
  })
  t.equal(r.headers.get('x-ratelimit-limit'), null, 'not rate-limited')
})

t.test('GET /v1/health: a failing probe gives 503 degraded', async t => {
  let checks = { postgres: 'ok', redis: 'ok' }
  const api = await startApi(t, { routes: ownRoutes([], async () => checks) })
  const ok = await api.get('/v1/health')
  t.same({ status: ok.status, body: ok.body.status, checks: ok.body.checks }, { status: 200, body: 'healthy', checks: { postgres: 'ok', redis: 'ok' } })
  checks = { postgres: 'ok', redis: 'error' }
  const bad = await api.get('/v1/health')
  t.equal(bad.status, 503)
  t.same(bad.body.checks, { postgres: 'ok', redis: 'error' })
  t.equal(bad.body.status, 'degraded')
  t.match(bad.body.timestamp, ISO)
})

t.test('GET /v1/health/cpaas: the breakers as the composition root reports them', async t => {
  const opened = Date.UTC(2026, 0, 2, 3, 4, 5, 6)
  const api = await startApi(t, { services: { cpaasHealth: () => [
    { name: 'telnyx', state: 'OPEN', openedAt: opened, lastError: 'timeout' },
    { name: 'telnyx-backup', state: 'CLOSED', openedAt: null, lastError: null },
  ] } })
  const r = await api.get('/v1/health/cpaas')
  t.equal(r.status, 200)
  t.same(r.body, {
    providers: [
      { name: 'telnyx', state: 'OPEN', openedAt: '2026-01-02T03:04:05.006Z', lastError: 'timeout' },
      { name: 'telnyx-backup', state: 'CLOSED', openedAt: null, lastError: null },
    ],
    timestamp: new Date(api.services.now()).toISOString(),
  })
})

t.test('GET /v1/health/cpaas without providers: an empty list', async t => {
  const api = await startApi(t)
  const r = await api.get('/v1/health/cpaas')
  t.same(r.body, { providers: [], timestamp: new Date(api.services.now()).toISOString() })
})
