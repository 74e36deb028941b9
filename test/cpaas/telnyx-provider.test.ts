// The Telnyx adapter with the REAL telnyx SDK against a local fake API: request shape, exactly
// one request per send (no SDK retries, contract D5), error mapping to codes that carry no
// number and no text.
import t, { type Test } from 'tap'
import { TelnyxProvider } from '../../api/cpaas/telnyx/provider.js'
import { FakeTelnyx } from '../support/fake-telnyx.js'
import { closedPort, failure } from '../support/provider-failure.js'

const MSG = { from: '+12025550100', to: '+12025550142', text: 'secret text Zoë' }
const PII = /\+\d{8,15}|secret text|KEY_test/

async function fake(t: Test) {
  const f = await FakeTelnyx.start({ apiKey: 'KEY_test' })
  t.teardown(() => f.close())
  return f
}

t.test('success: one POST /v2/messages with the message fields and the bearer key', async t => {
  const f = await fake(t)
  const p = new TelnyxProvider({ apiKey: 'KEY_test', baseURL: f.baseURL, messagingProfileId: 'prof-1' })
  const res = await p.sendSms({ ...MSG, webhookUrl: 'https://m.example/v1/webhooks/cpaas/sms' })
  t.match(res.providerMessageId, /^[0-9a-f-]{36}$/)
  t.equal(f.count, 1)
  const req = f.requests[0]!
  t.equal(req.headers.authorization, 'Bearer KEY_test')
  t.same(req.body, { from: MSG.from, to: MSG.to, text: MSG.text, messaging_profile_id: 'prof-1', webhook_url: 'https://m.example/v1/webhooks/cpaas/sms' })
  t.equal(p.name, 'telnyx')
})

t.test('HTTP 500: exactly ONE request (maxRetries 0), code provider-http-500, unambiguous fault', async t => {
  const f = await fake(t)
  f.setBehaviour({ status: 500 })
  const p = new TelnyxProvider({ apiKey: 'KEY_test', baseURL: f.baseURL })
  for (let i = 1; i <= 3; i++) {
    const err = await failure(p.sendSms(MSG))
    t.match(err, { message: 'provider-http-500', code: 'provider-http-500', ambiguous: false, providerFault: true, status: 500 })
    t.equal(f.count, i, `one request per send (${i})`)
    t.notMatch(err.message + String(err.stack), PII)
  }
})

t.test('429 and 503 are not retried either', async t => {
  const f = await fake(t)
  const p = new TelnyxProvider({ apiKey: 'KEY_test', baseURL: f.baseURL })
  f.enqueue({ status: 429 }, { status: 503 })
  t.match(await failure(p.sendSms(MSG)), { code: 'provider-http-429', providerFault: true })
  t.match(await failure(p.sendSms(MSG)), { code: 'provider-http-503', providerFault: true })
  t.equal(f.count, 2)
})

t.test('4xx refusals are not provider faults; 401 (bad key) is', async t => {
  const f = await fake(t)
  const p = new TelnyxProvider({ apiKey: 'KEY_test', baseURL: f.baseURL })
  f.enqueue({ status: 422 })
  t.match(await failure(p.sendSms(MSG)), { code: 'provider-http-422', providerFault: false, ambiguous: false })
  const wrong = new TelnyxProvider({ apiKey: 'KEY_wrong', baseURL: f.baseURL })
  t.match(await failure(wrong.sendSms(MSG)), { code: 'provider-http-401', providerFault: true, ambiguous: false })
  t.equal(f.count, 2)
})

t.test('no answer within the timeout: provider-timeout, ambiguous, one request', async t => {
  const f = await fake(t)
  f.setBehaviour({ hang: true })
  const p = new TelnyxProvider({ apiKey: 'KEY_test', baseURL: f.baseURL, timeoutMs: 150 })
  const started = Date.now()
  t.match(await failure(p.sendSms(MSG)), { code: 'provider-timeout', ambiguous: true, providerFault: true })
  t.ok(Date.now() - started < 5_000, 'gave up in time (generous bound)')
  t.equal(f.count, 1)
})

t.test('connection dropped after the request went out: ambiguous provider-connection', async t => {
  const f = await fake(t)
  f.setBehaviour({ drop: true })
  const p = new TelnyxProvider({ apiKey: 'KEY_test', baseURL: f.baseURL })
  t.match(await failure(p.sendSms(MSG)), { code: 'provider-connection', ambiguous: true })
  t.equal(f.count, 1)
})

t.test('connection refused: provider-unreachable, unambiguous (nothing was sent)', async t => {
  const port = await closedPort()
  const p = new TelnyxProvider({ apiKey: 'KEY_test', baseURL: `http://127.0.0.1:${port}/v2` })
  t.match(await failure(p.sendSms(MSG)), { code: 'provider-unreachable', ambiguous: false, providerFault: true })
})

t.test('2xx without a message id: ambiguous provider-bad-response', async t => {
  const f = await fake(t)
  f.enqueue({ body: { data: {} } })
  const p = new TelnyxProvider({ apiKey: 'KEY_test', baseURL: f.baseURL })
  t.match(await failure(p.sendSms(MSG)), { code: 'provider-bad-response', ambiguous: true })
})

t.test('configuration', async t => {
  t.throws(() => new TelnyxProvider({ apiKey: '', baseURL: 'http://127.0.0.1:1/v2' }), /API key/)
  t.throws(() => new TelnyxProvider({ apiKey: 'KEY_test', baseURL: 'http://127.0.0.1:1/v1' }), /must .* end.* in \/v2|ending in \/v2/)
  t.doesNotThrow(() => new TelnyxProvider({ apiKey: 'KEY_test', baseURL: 'http://127.0.0.1:1/v2/' }), 'trailing slash tolerated')
  t.doesNotThrow(() => new TelnyxProvider({ apiKey: 'KEY_test' }), 'defaults to api.telnyx.com/v2')
})

t.test('TELNYX_CLIENT_ID/SECRET in the environment are not picked up (no OAuth detour)', async t => {
  const f = await fake(t)
  const saved = { id: process.env.TELNYX_CLIENT_ID, secret: process.env.TELNYX_CLIENT_SECRET }
  process.env.TELNYX_CLIENT_ID = 'should-not-be-used'
  process.env.TELNYX_CLIENT_SECRET = 'should-not-be-used'
  t.teardown(() => {
    if (saved.id === undefined) delete process.env.TELNYX_CLIENT_ID; else process.env.TELNYX_CLIENT_ID = saved.id
    if (saved.secret === undefined) delete process.env.TELNYX_CLIENT_SECRET; else process.env.TELNYX_CLIENT_SECRET = saved.secret
  })
  const p = new TelnyxProvider({ apiKey: 'KEY_test', baseURL: f.baseURL })
  await p.sendSms(MSG)
  t.equal(f.count, 1)
  t.equal(f.requests[0]!.headers.authorization, 'Bearer KEY_test')
})
