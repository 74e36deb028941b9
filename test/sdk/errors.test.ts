// Failures through the SDK: every non-2xx answer is a MasklineError carrying the problem document,
// and 429s are retried after their Retry-After only where repeating cannot do anything twice
// (GETs, the token exchange, a create with its automatic Idempotency-Key), within the bounds given.
// The service runs on a clock the test moves: the SDK's `sleep` advances it by what it was asked
// to wait, so a 60-second Retry-After costs no real time and the service's limiter sees it pass.
import t, { type Test } from 'tap'
import { startTestService } from '../support/service.js'
import { Maskline, MasklineError } from '../../sdk/src/index.js'
import { recordingFetch, sdkTenant } from './sdk-support.js'

const TIER_REQUESTS_PER_MINUTE = 100 // STARTER (engine/types.ts TIER_LIMITS)
const TOKEN_EXCHANGES_PER_MINUTE = 10 // api/rate-limit/limiter.ts TOKEN_LIMIT_PER_KEY

async function setup(t: Test) {
  let offset = 0
  const api = await startTestService(t, { now: () => Date.now() + offset })
  const waits: number[] = []
  const sleep = async (ms: number) => { waits.push(ms); offset += ms }
  const { fetch, sent } = recordingFetch()
  const tenant = await sdkTenant(api, { fetch })
  const client = (retry?: { maxRetries?: number; maxWaitMs?: number }) =>
    new Maskline({ baseUrl: api.url, apiKey: tenant.signed.apiKey, apiSecret: tenant.signed.apiSecret, fetch, sleep, ...(retry ? { retry } : {}) })
  return { api, waits, sent, tenant, client }
}

t.test('answers other than 2xx are MasklineErrors with the problem document', async t => {
  const { api, client } = await setup(t)
  const c = client()
  const missing = await c.sessions.get('01890000-0000-7000-8000-000000000000').catch((e: unknown) => e)
  t.ok(missing instanceof MasklineError)
  t.match(missing, { type: 'not-found', status: 404, instance: String, problem: { type: /\/errors\/not-found$/, status: 404 } })

  const invalid = await c.sessions.create({ agentPhone: 'not a number', customerPhone: api.phone(2) }).catch((e: unknown) => e) as MasklineError
  t.match(invalid, { type: 'validation', status: 400, detail: String })
  t.ok(invalid.errors.length > 0 && invalid.errors.every(e => typeof e.field === 'string' && typeof e.issue === 'string'), 'errors[] of the problem')

  const stranger = new Maskline({ baseUrl: api.url, token: 'not.a.jwt' })
  t.match(await stranger.sessions.list().first().catch((e: unknown) => e), { name: 'MasklineError', type: 'unauthorized', status: 401 })
  const wrongKey = new Maskline({ baseUrl: api.url, apiKey: `rk_live_${'0'.repeat(48)}`, apiSecret: `rs_${'0'.repeat(64)}` })
  t.match(await wrongKey.calls.list().first().catch((e: unknown) => e), { type: 'unauthorized', status: 401 }, 'a refused key pair too')
  const offline = new Maskline({ baseUrl: 'http://127.0.0.1:1', token: 'x' })
  t.match(await offline.health.live().catch((e: unknown) => e), { name: 'MasklineError', type: 'network', status: 0 })
})

t.test('a 429 of the tier quota: GETs and creates retried after Retry-After, other POSTs not', async t => {
  const { api, waits, sent, client } = await setup(t)
  const c = client()
  for (let i = 0; i < TIER_REQUESTS_PER_MINUTE; i++) await c.sessions.list().first()
  t.same(waits, [], 'no wait within the quota')

  // The quota is spent: a POST that could create twice is not repeated, the error says when to retry.
  const refused = await c.webhooks.test().catch((e: unknown) => e) as MasklineError
  t.match(refused, { type: 'rate-limit', status: 429 })
  t.ok(refused.retryAfter! >= 1 && refused.retryAfter! <= 60, `retryAfter ${refused.retryAfter} s`)
  t.same(waits, [], 'POST /v1/webhooks/test was not retried')

  // A create goes out with an Idempotency-Key, is answered 429, waits Retry-After and succeeds.
  const before = sent.length
  const s = await c.sessions.create({ agentPhone: api.phone(1), customerPhone: api.phone(2) })
  t.equal(s.state, 'ACTIVE')
  const creates = sent.slice(before).filter(r => r.method === 'POST' && r.path === '/v1/sessions')
  t.same(creates.map(r => r.status), [429, 201], 'refused once, then created')
  t.ok(creates[0]!.headers['idempotency-key'], 'with an Idempotency-Key')
  t.equal(creates[1]!.headers['idempotency-key'], creates[0]!.headers['idempotency-key'], 'the same key on the retry')
  t.equal(waits.length, 1)
  t.equal(waits[0], refused.retryAfter! * 1000, 'waited what Retry-After said')
  t.equal((await c.sessions.list({ state: 'ACTIVE' }).all()).length, 1, 'one session, not two')
})

t.test('retries are bounded: by the total wait and by their number', async t => {
  const { waits, client } = await setup(t)
  const c = client()
  for (let i = 0; i < TIER_REQUESTS_PER_MINUTE; i++) await c.calls.list().first()
  const impatient = client({ maxWaitMs: 500 })
  const e1 = await impatient.calls.list().first().catch((e: unknown) => e)
  t.match(e1, { type: 'rate-limit', status: 429 }, 'a Retry-After beyond maxWaitMs is not waited for')
  t.same(waits, [])
  const once = client({ maxRetries: 0 })
  t.match(await once.calls.list().first().catch((e: unknown) => e), { type: 'rate-limit' }, 'maxRetries 0: no retry')
  t.same(waits, [])
})

t.test('the token exchange is retried after its per-key throttle', async t => {
  const { waits, sent, tenant, client } = await setup(t)
  for (let i = 0; i < TOKEN_EXCHANGES_PER_MINUTE; i++) await tenant.pub.auth.exchange({ apiKey: tenant.signed.apiKey, apiSecret: tenant.signed.apiSecret })
  const before = sent.length
  const c = client()
  t.match(await c.config.get(), { id: tenant.signed.tenantId }, 'the first call trades the key, after a wait')
  t.same(sent.slice(before).map(r => `${r.method} ${r.path} ${r.status}`), ['POST /v1/auth/token 429', 'POST /v1/auth/token 200', 'GET /v1/config 200'])
  t.equal(waits.length, 1)
  t.ok(waits[0]! >= 1_000 && waits[0]! <= 60_000)
})
