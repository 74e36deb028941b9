// The Twilio adapter with the REAL twilio SDK against a local fake Twilio API (TWILIO_BASE_URL):
// request shape (Messages API, statusCallback), exactly one request per send (no SDK retries,
// 429 included), the timeout, error mapping to codes that carry no number, no text, no token.
import t, { type Test } from 'tap'
import { TwilioProvider } from '../../api/cpaas/twilio/provider.js'
import { FAKE_ACCOUNT_SID, FAKE_AUTH_TOKEN, FakeTwilio, type FakeTwilioOptions } from '../support/fake-twilio.js'
import { closedPort, failure } from '../support/provider-failure.js'

const MSG = { from: '+12025550100', to: '+12025550142', text: 'secret text Zoë' }
const PII = new RegExp(`\\+\\d{8,15}|secret text|${FAKE_AUTH_TOKEN}`)
const CREDS = { accountSid: FAKE_ACCOUNT_SID, authToken: FAKE_AUTH_TOKEN }

async function fake(t: Test, opts?: FakeTwilioOptions) {
  const f = await FakeTwilio.start(opts)
  t.teardown(() => f.close())
  return f
}

t.test('success: one POST to the Messages resource, Basic auth, the statusCallback', async t => {
  const f = await fake(t)
  const p = new TwilioProvider({ ...CREDS, baseUrl: f.baseUrl, statusCallbackUrl: () => 'https://m.example/v1/webhooks/twilio/sms' })
  const res = await p.sendSms({ ...MSG, webhookUrl: 'https://m.example/v1/webhooks/cpaas/sms' })
  t.match(res.providerMessageId, /^SM[0-9a-f]{32}$/)
  t.equal(f.count, 1)
  t.equal(f.requests[0]!.path, `/2010-04-01/Accounts/${FAKE_ACCOUNT_SID}/Messages.json`)
  t.equal(f.requests[0]!.headers.authorization, 'Basic ' + Buffer.from(`${FAKE_ACCOUNT_SID}:${FAKE_AUTH_TOKEN}`).toString('base64'))
  t.same({ ...f.messages[0] }, { From: MSG.from, To: MSG.to, Body: MSG.text, StatusCallback: 'https://m.example/v1/webhooks/twilio/sms' }, "Twilio's own status callback, not the Telnyx one")
  t.equal(p.name, 'twilio')
})

t.test('an API key pair authenticates the REST call; the account stays in the path', async t => {
  const key = 'SK' + 'a'.repeat(32), secret = 'api-secret-value-1234'
  const f = await fake(t, { user: key, password: secret })
  const p = new TwilioProvider({ accountSid: FAKE_ACCOUNT_SID, apiKey: key, apiSecret: secret, baseUrl: f.baseUrl })
  await p.sendSms(MSG)
  t.equal(f.requests[0]!.headers.authorization, 'Basic ' + Buffer.from(`${key}:${secret}`).toString('base64'))
  t.equal(f.requests[0]!.path, `/2010-04-01/Accounts/${FAKE_ACCOUNT_SID}/Messages.json`)
})

t.test('HTTP 500, 503 and 429: exactly ONE request each (no SDK retries), unambiguous faults', async t => {
  const f = await fake(t)
  const p = new TwilioProvider({ ...CREDS, baseUrl: f.baseUrl })
  f.enqueue({ status: 500 }, { status: 503 }, { status: 429 })
  for (const [i, status] of [500, 503, 429].entries()) {
    const err = await failure(p.sendSms(MSG))
    t.match(err, { code: `provider-http-${status}`, ambiguous: false, providerFault: true, status })
    t.equal(f.count, i + 1, `one request for the ${status}`)
    t.notMatch(err.message + String(err.stack), PII)
  }
})

t.test('400 refusals are not provider faults; 401 (bad token) is', async t => {
  const f = await fake(t)
  f.enqueue({ status: 400 })
  t.match(await failure(new TwilioProvider({ ...CREDS, baseUrl: f.baseUrl }).sendSms(MSG)), { code: 'provider-http-400', providerFault: false, ambiguous: false })
  const wrong = new TwilioProvider({ ...CREDS, authToken: 'f'.repeat(32), baseUrl: f.baseUrl })
  t.match(await failure(wrong.sendSms(MSG)), { code: 'provider-http-401', providerFault: true, ambiguous: false })
  t.equal(f.count, 2)
})

t.test('no answer within the timeout: provider-timeout, ambiguous, one request', async t => {
  const f = await fake(t)
  f.setBehaviour({ hang: true })
  const p = new TwilioProvider({ ...CREDS, baseUrl: f.baseUrl, timeoutMs: 150 })
  const started = Date.now()
  t.match(await failure(p.sendSms(MSG)), { code: 'provider-timeout', ambiguous: true, providerFault: true })
  t.ok(Date.now() - started < 5_000, 'gave up in time (generous bound)')
  t.equal(f.count, 1)
})

t.test('connection dropped after the request went out: ambiguous', async t => {
  const f = await fake(t)
  f.setBehaviour({ drop: true })
  t.match(await failure(new TwilioProvider({ ...CREDS, baseUrl: f.baseUrl }).sendSms(MSG)), { code: 'provider-connection', ambiguous: true })
  t.equal(f.count, 1)
})

t.test('connection refused: provider-unreachable, unambiguous (nothing was sent)', async t => {
  const port = await closedPort()
  const p = new TwilioProvider({ ...CREDS, baseUrl: `http://127.0.0.1:${port}` })
  t.match(await failure(p.sendSms(MSG)), { code: 'provider-unreachable', ambiguous: false, providerFault: true })
})

t.test('2xx without a message sid: ambiguous provider-bad-response', async t => {
  const f = await fake(t)
  f.enqueue({ body: { status: 'queued' } })
  t.match(await failure(new TwilioProvider({ ...CREDS, baseUrl: f.baseUrl }).sendSms(MSG)), { code: 'provider-bad-response', ambiguous: true })
})

t.test('configuration', async t => {
  t.throws(() => new TwilioProvider({ accountSid: 'SK' + 'a'.repeat(32), authToken: FAKE_AUTH_TOKEN }), /TWILIO_ACCOUNT_SID/)
  t.throws(() => new TwilioProvider({ accountSid: FAKE_ACCOUNT_SID }), /TWILIO_AUTH_TOKEN/)
  t.throws(() => new TwilioProvider({ ...CREDS, baseUrl: 'ftp://x' }), /TWILIO_BASE_URL/)
  t.doesNotThrow(() => new TwilioProvider(CREDS), 'defaults to api.twilio.com')
})

t.test('TWILIO_* in the environment are not picked up: the configured account is used', async t => {
  const f = await fake(t)
  const saved = { sid: process.env.TWILIO_ACCOUNT_SID, token: process.env.TWILIO_AUTH_TOKEN, log: process.env.TWILIO_LOG_LEVEL }
  process.env.TWILIO_ACCOUNT_SID = 'AC' + '1'.repeat(32)
  process.env.TWILIO_AUTH_TOKEN = '2'.repeat(32)
  process.env.TWILIO_LOG_LEVEL = 'debug'
  t.teardown(() => {
    for (const [k, v] of [['TWILIO_ACCOUNT_SID', saved.sid], ['TWILIO_AUTH_TOKEN', saved.token], ['TWILIO_LOG_LEVEL', saved.log]] as const) {
      if (v === undefined) delete process.env[k]; else process.env[k] = v
    }
  })
  const logged: unknown[] = []
  const log = console.log
  console.log = (...a: unknown[]) => { logged.push(a) }
  try {
    await new TwilioProvider({ ...CREDS, baseUrl: f.baseUrl }).sendSms(MSG)
  } finally {
    console.log = log
  }
  t.equal(f.count, 1, 'sent with the configured credentials (the fake refuses others)')
  t.same(logged, [], 'TWILIO_LOG_LEVEL=debug does not make the SDK print the request')
})
