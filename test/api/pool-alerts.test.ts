// contract D12: pool alerts through the real service. A region's free share falling below
// 20 %, 10 % and 5 % and recovering above 25 % is announced once per crossing: one warning line
// (no number), the region's level and free share in /metrics, and a pool.low event (region and
// counts only: no session, no number) to every tenant with live sessions in the region, on the
// stream and in the outbox. Creates refused for lack of numbers are counted in /metrics and in
// GET /v1/analytics/sessions-over-time. With two nodes on one Postgres and Redis, each crossing
// is announced by one node only.
import t from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import { sql } from 'slonik'
import { Ajv } from 'ajv'
import formatsPlugin from 'ajv-formats'
import { loadConfig } from '../../gateway/config.js'
import { startService } from '../../gateway/service.js'
import { eventually, startTestService, type TestService } from '../support/service.js'
import { connectWs } from '../support/ws-client.js'

// 20 US numbers, no cooldown (a released number is free at once).
const ENV = { NUMBER_POOL: 'US:+12025550100-+12025550119', NUMBER_COOLDOWN_SECONDS: '0' }

async function poolEvents(api: TestService, tenantId?: string) {
  await api.svc.flushRecords()
  const rows = await api.svc.db.pool.any(sql.unsafe`
    SELECT tenant_id, envelope FROM outbox WHERE type = 'pool.low' ${tenantId ? sql.fragment`AND tenant_id = ${tenantId}` : sql.fragment``} ORDER BY id`)
  return rows.map(r => (r as { envelope: { data: Record<string, unknown> } }).envelope.data)
}

t.test('pool alerts: thresholds, hysteresis, who is told, metrics, refusals', async t => {
  const api = await startTestService(t, { env: ENV })
  const a = await api.signup(), b = await api.signup(), c = await api.signup()
  const agent = api.phone(1)
  let n = 0
  // One agent, a new customer each time: a number carries each party once, so each create takes a number.
  const create = (acct = a) => api.req('POST', '/v1/sessions', { token: acct.token, body: { agentPhone: agent, customerPhone: api.phone(100 + ++n), gracePeriodMinutes: 0 } })
  const ids: string[] = []
  const metric = async (name: string) => (await api.svc.metrics.registry.getSingleMetricAsString(name))

  t.equal((await create(c)).status, 201, "tenant C's one session")
  for (let i = 0; i < 15; i++) ids.push((await create()).body.id)
  await api.svc.poolAlerts.check()
  t.same(await poolEvents(api), [], '4 of 20 free (20 %) is not below 20 %')
  const stream = await connectWs(`${api.url}/v1/stream?types=pool.low`, { headers: { authorization: `Bearer ${c.token}` } })
  t.teardown(() => { stream.socket.destroy() })
  ids.push((await create()).body.id)
  await api.svc.poolAlerts.check()
  await api.svc.poolAlerts.check() // a second check, and more creates within the level: no new alert
  const low = await poolEvents(api)
  t.equal(low.length, 2, 'one event per tenant with live sessions in the region')
  const counts = { region: 'US', total: 20, available: 3, inUse: 17, cooldown: 0 }
  t.same(await poolEvents(api, a.tenantId), [{ tenantId: a.tenantId, state: 'LOW', threshold: 20, ...counts }], 'region and counts only: no session, no number')
  t.same(await poolEvents(api, c.tenantId), [{ tenantId: c.tenantId, state: 'LOW', threshold: 20, ...counts }])
  t.same(await poolEvents(api, b.tenantId), [], 'a tenant without live sessions in the region hears nothing')
  await stream.waitForMessages(1, 15_000)
  t.match(JSON.parse(stream.messages[0]!), { type: 'pool.low', data: { tenantId: c.tenantId, state: 'LOW', threshold: 20, region: 'US' } }, 'on the stream too')
  const warnings = api.logLines.filter(l => l.includes('"code":"pool-low"'))
  t.equal(warnings.length, 1, 'one warning line')
  t.match(JSON.parse(warnings[0]!), { level: 40, alertLevel: 1, region: 'US', threshold: 20, available: 3 }, 'at warn, with the level and counts')
  t.match(await metric('maskline_pool_alert_level'), /maskline_pool_alert_level\{region="US"\} 1/)
  t.match(await metric('maskline_pool_free_ratio'), /maskline_pool_free_ratio\{region="US"\} 0\.15/)

  // The envelope fits the document's EventEnvelope schema (no session fields needed).
  const doc = (await api.req('GET', '/v1/openapi.json')).body
  const ajv = new Ajv({ strict: false, allowUnionTypes: true })
  formatsPlugin.default(ajv)
  const fits = ajv.compile(doc.components.schemas.EventEnvelope)
  t.ok(fits(JSON.parse(stream.messages[0]!)), `pool.low fits the EventEnvelope schema: ${ajv.errorsText(fits.errors)}`)

  ids.push((await create()).body.id) // 2 free: 10 %, not below 10 %
  await api.svc.poolAlerts.check()
  t.equal((await poolEvents(api, a.tenantId)).length, 1, 'no alert inside a level')
  ids.push((await create()).body.id) // 1 free: 5 %
  await api.svc.poolAlerts.check()
  ids.push((await create()).body.id) // 0 free
  await api.svc.poolAlerts.check()
  t.same((await poolEvents(api, a.tenantId)).map(d => [d['state'], d['threshold'], d['available']]), [['LOW', 20, 3], ['LOW', 10, 1], ['LOW', 5, 0]])

  const refused = await create()
  t.equal(refused.status, 503)
  t.match(refused.body, { type: /\/errors\/pool-exhausted$/ })
  t.match(await metric('maskline_pool_exhausted_total'), /maskline_pool_exhausted_total 1/)
  const hour = new Date(Math.floor(Date.now() / 3_600_000) * 3_600_000)
  // The refusal is written off the answer's path: wait for its row (not the API: its rate limit).
  await eventually(async () => ((await api.svc.db.pool.anyFirst(sql.unsafe`SELECT count FROM pool_refusals WHERE tenant_id = ${a.tenantId}`)).length ? true : undefined), 'the refusal row')
  const series = await api.req('GET', `/v1/analytics/sessions-over-time?periodStart=${new Date(hour.getTime() - 3_600_000).toISOString()}&periodEnd=${new Date(hour.getTime() + 7_200_000).toISOString()}&granularity=hour`, { token: a.token })
  t.same(series.body, [{ ts: hour.toISOString(), count: 19, poolExhausted: 1 }], "tenant A's hour: 19 created, 1 refused")
  const cSeries = await api.req('GET', `/v1/analytics/sessions-over-time?periodStart=${hour.toISOString()}&periodEnd=${new Date(hour.getTime() + 3_600_000).toISOString()}&granularity=day`, { token: c.token })
  t.same(cSeries.body, [{ ts: new Date(Math.floor(hour.getTime() / 86_400_000) * 86_400_000).toISOString(), count: 1 }], 'no refusal of its own: no field')

  // Ending 10 sessions frees 10 numbers (no cooldown here): 50 % free, recovered once. The
  // service's own once-a-second check may see it first, somewhere past 25 % (6 or more free).
  for (const id of ids.slice(0, 10)) t.equal((await api.req('POST', `/v1/sessions/${id}/end`, { token: a.token })).status, 200)
  await api.svc.expireDue()
  await api.svc.poolAlerts.check()
  await api.svc.poolAlerts.check()
  const recovered = (await poolEvents(api, a.tenantId)).at(-1)!
  t.match(recovered, { tenantId: a.tenantId, state: 'RECOVERED', threshold: 25, region: 'US', total: 20, cooldown: 0 })
  t.ok((recovered['available'] as number) > 5 && (recovered['available'] as number) + (recovered['inUse'] as number) === 20, 'over 25 % free')
  t.same(Object.keys(recovered).sort(), ['available', 'cooldown', 'inUse', 'region', 'state', 'tenantId', 'threshold', 'total'], 'region and counts only')
  t.equal((await poolEvents(api)).length, 8, 'four crossings, two tenants each')
  t.match(await metric('maskline_pool_alert_level'), /maskline_pool_alert_level\{region="US"\} 0/)
  t.equal(api.logLines.filter(l => l.includes('"code":"pool-low"')).length, 4, 'one warning per crossing')
  await stream.waitForMessages(4, 15_000)
})

t.test('pool.low is subscribable', async t => {
  const api = await startTestService(t)
  const a = await api.signup()
  const r = await api.req('POST', '/v1/webhooks', { token: a.token, body: { url: 'https://hooks.example.test/pool', events: ['pool.low'] } })
  t.equal(r.status, 201, r.text)
})

t.test('two nodes: each crossing announced by one node', { skip: !process.env.TEST_REDIS_URL && 'needs TEST_REDIS_URL (the services backend)' }, async t => {
  const api = await startTestService(t, { env: ENV })
  const dataDir = mkdtempSync(join(tmpdir(), 'maskline-node2-'))
  const node2 = await startService({
    db: api.svc.db, logDestination: new Writable({ write(_c, _e, cb) { cb() } }),
    config: loadConfig({
      ...ENV, PORT: '0', METRICS_PORT: '0', DATA_DIR: dataDir, LOG_LEVEL: 'warn', REDIS_URL: process.env.TEST_REDIS_URL!,
      JWT_SECRET: Buffer.from(api.svc.services.jwtSecret).toString(), PHONE_KEY: api.svc.services.phoneKey.toString('base64'),
    }),
  })
  t.teardown(async () => { await node2.close(); rmSync(dataDir, { recursive: true, force: true }) })
  const a = await api.signup()
  const ids: string[] = []
  for (let i = 0; i < 17; i++) ids.push((await api.req('POST', '/v1/sessions', { token: a.token, body: { agentPhone: api.phone(1), customerPhone: api.phone(200 + i) } })).body.id)
  await eventually(async () => (node2.engine.poolCounts(Date.now()).reduce((s, p) => s + p.inUse, 0) === 17 ? true : undefined), 'node 2 holds the same pool')
  await Promise.all([api.svc.poolAlerts.check(), node2.poolAlerts.check(), api.svc.poolAlerts.check(), node2.poolAlerts.check()])
  t.same((await poolEvents(api)).map(d => d['threshold']), [20], 'one event for the crossing both nodes saw')
})
