// Twilio's configuration is checked at boot (contract D1): TWILIO_ACCOUNT_SID and TWILIO_AUTH_TOKEN
// together (the token also checks webhook signatures, API key or not), TWILIO_API_KEY with
// TWILIO_API_SECRET, well-formed values, and every provider NUMBER_POOL names configured. Messages
// name the variables and never print a token or secret.
import t, { type Test } from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ConfigError, loadConfig } from '../../gateway/config.js'

const SID = 'AC' + 'a'.repeat(32)
const TOKEN = '0badc0de'.repeat(4)
const API_KEY = 'SK' + 'b'.repeat(32)
const API_SECRET = 'api-secret-0123456789abcdef'
const TWILIO = { TWILIO_ACCOUNT_SID: SID, TWILIO_AUTH_TOKEN: TOKEN }

function env(t: Test, vars: Record<string, string>): Record<string, string> {
  const dir = mkdtempSync(join(tmpdir(), 'maskline-cfg-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return { DATA_DIR: dir, ...vars }
}

function refused(t: Test, vars: Record<string, string>, message: RegExp): void {
  let err: unknown = null
  try { loadConfig(env(t, vars)) } catch (e) { err = e }
  t.type(err, ConfigError, `refused: ${JSON.stringify(Object.keys(vars))}`)
  t.match((err as Error).message, message)
  for (const secret of [TOKEN, API_SECRET, API_KEY]) t.notOk((err as Error).message.includes(secret), 'no secret in the message')
}

t.test('a Twilio deployment', async t => {
  const cfg = loadConfig(env(t, TWILIO))
  t.equal(cfg.provider, 'twilio', 'CPAAS_PROVIDER defaults to twilio when only Twilio is configured')
  t.equal(cfg.signature, 'hmac-sha1')
  t.equal(cfg.hmacSecret, TOKEN, 'the /v1/webhooks/cpaas callbacks are checked with the Auth Token too')
  t.same(cfg.twilio, { accountSid: SID, authToken: TOKEN })
  const keyed = loadConfig(env(t, { ...TWILIO, TWILIO_API_KEY: API_KEY, TWILIO_API_SECRET: API_SECRET, TWILIO_BASE_URL: 'http://127.0.0.1:9/' }))
  t.same(keyed.twilio, { accountSid: SID, authToken: TOKEN, apiKey: API_KEY, apiSecret: API_SECRET, baseUrl: 'http://127.0.0.1:9' })
  const both = loadConfig(env(t, { ...TWILIO, TELNYX_API_KEY: 'KEY_x', TELNYX_PUBLIC_KEY: Buffer.alloc(32, 9).toString('base64'), NUMBER_POOL: 'US:+12025550100-+12025550101@twilio;US:+12025550102@telnyx+twilio;US:+12025550103' }))
  t.equal(both.provider, 'telnyx', 'with both, CPAAS_PROVIDER defaults to telnyx as before')
  const twilioFirst = loadConfig(env(t, { ...TWILIO, CPAAS_PROVIDER: 'twilio', TELNYX_API_KEY: 'KEY_x', TELNYX_PUBLIC_KEY: Buffer.alloc(32, 9).toString('base64') }))
  t.equal(twilioFirst.signature, 'telnyx-ed25519', 'with Telnyx configured, /v1/webhooks/cpaas is checked as Telnyx signs, whatever the default provider')
})

t.test('missing or malformed settings stop the boot with a clear message', async t => {
  refused(t, { CPAAS_PROVIDER: 'twilio' }, /TWILIO_ACCOUNT_SID and TWILIO_AUTH_TOKEN are required with CPAAS_PROVIDER=twilio/)
  refused(t, { TWILIO_ACCOUNT_SID: SID }, /TWILIO_ACCOUNT_SID and TWILIO_AUTH_TOKEN are both required/)
  refused(t, { TWILIO_AUTH_TOKEN: TOKEN }, /TWILIO_ACCOUNT_SID and TWILIO_AUTH_TOKEN are both required/)
  refused(t, { ...TWILIO, TWILIO_API_KEY: API_KEY }, /TWILIO_API_KEY and TWILIO_API_SECRET go together/)
  refused(t, { ...TWILIO, TWILIO_ACCOUNT_SID: 'SK' + 'a'.repeat(32) }, /TWILIO_ACCOUNT_SID=/)
  refused(t, { ...TWILIO, TWILIO_AUTH_TOKEN: 'not-a-token' }, /TWILIO_AUTH_TOKEN \(value hidden\)/)
  refused(t, { ...TWILIO, TWILIO_API_KEY: 'AC' + 'b'.repeat(32), TWILIO_API_SECRET: API_SECRET }, /TWILIO_API_KEY \(value hidden\)/)
  refused(t, { ...TWILIO, TWILIO_BASE_URL: 'api.twilio.com' }, /TWILIO_BASE_URL=/)
})

t.test('NUMBER_POOL providers must be configured and spelled right', async t => {
  refused(t, { TELNYX_API_KEY: 'KEY_x', TELNYX_PUBLIC_KEY: Buffer.alloc(32, 9).toString('base64'), NUMBER_POOL: 'US:+12025550100@twilio' }, /NUMBER_POOL names @twilio numbers, which need TWILIO_ACCOUNT_SID and TWILIO_AUTH_TOKEN/)
  refused(t, { ...TWILIO, NUMBER_POOL: 'US:+12025550100@twilio+telnyx' }, /NUMBER_POOL names @telnyx numbers, which need TELNYX_API_KEY/)
  refused(t, { ...TWILIO, NUMBER_POOL: 'US:+12025550100@plivo' }, /NUMBER_POOL entry "US:\+12025550100@plivo": provider must be telnyx or twilio/)
  refused(t, { ...TWILIO, NUMBER_POOL: 'US:+12025550100@twilio+twilio' }, /provider must be/)
  refused(t, { ...TWILIO, CPAAS_PROVIDER: 'sandbox', CPAAS_SIGNATURE: 'none', NUMBER_POOL: 'US:+12025550100@twilio' }, /CPAAS_PROVIDER=sandbox/)
})
