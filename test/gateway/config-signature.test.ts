// contract D1: CPAAS_SIGNATURE=none (unsigned provider callbacks) is refused at boot unless
// CPAAS_PROVIDER=sandbox, with a message naming the variable and printing no secret. loadConfig
// refuses through validateSignatureConfig, so the rule lives in one place; the last test boots
// gateway/main.ts exactly as `npm start` does and expects it to stop before opening anything.
import t, { type Test } from 'tap'
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { ConfigError, EnvSchema, loadConfig } from '../../gateway/config.js'
import { validateSignatureConfig } from '../../api/cpaas/signature.js'
import { NO_CHILD_COVERAGE } from '../support/child-service.js'

// Every secret a telnyx deployment would set, each with a value that is easy to find in a message.
const SECRETS = {
  TELNYX_API_KEY: 'KEY_secret_telnyx_0123456789',
  TELNYX_BACKUP_API_KEY: 'KEY_secret_backup_0123456789',
  CPAAS_HMAC_SECRET: 'hmac-secret-0123456789abcdef',
  JWT_SECRET: 'jwt-secret-0123456789abcdef0123456789abcdef',
  PHONE_KEY: Buffer.alloc(32, 7).toString('base64'),
} as const
const DATABASE_URL = 'postgres://maskline:db-password-0123456789@127.0.0.1:5432/maskline'
const REDIS_URL = 'redis://:redis-password-0123456789@127.0.0.1:6379'
const PUBLIC_KEY = Buffer.alloc(32, 9).toString('base64')
const hidden = [...Object.values(SECRETS), 'db-password-0123456789', 'redis-password-0123456789']

function tempDir(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'maskline-cfg-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

/** What loadConfig threw, or a failure when it did not throw. */
function refusal(t: Test, env: Record<string, string>): ConfigError {
  try {
    loadConfig(env)
  } catch (err) {
    t.type(err, ConfigError, 'a ConfigError: main.ts prints its message and exits 2')
    return err as ConfigError
  }
  t.fail('loadConfig accepted the configuration')
  return new ConfigError('')
}

function refusedMessage(provider: 'telnyx'): string {
  try {
    validateSignatureConfig(provider, 'none')
  } catch (err) {
    return (err as Error).message
  }
  throw new Error('validateSignatureConfig accepted none with a non-sandbox provider')
}

t.test('CPAAS_PROVIDER=telnyx with CPAAS_SIGNATURE=none is refused, naming the variable, printing no secret', async t => {
  const dataDir = tempDir(t)
  const err = refusal(t, {
    DATA_DIR: dataDir, DATABASE_URL, REDIS_URL, CPAAS_PROVIDER: 'telnyx', CPAAS_SIGNATURE: 'none',
    TELNYX_PUBLIC_KEY: PUBLIC_KEY, TELNYX_BASE_URL: 'http://127.0.0.1:9/v2', ...SECRETS,
  })
  t.match(err.message, /^invalid configuration: CPAAS_SIGNATURE=none is refused with CPAAS_PROVIDER=telnyx\b/)
  t.equal(err.message, `invalid configuration: ${refusedMessage('telnyx')}`, 'the refusal is validateSignatureConfig\'s')
  for (const s of hidden) t.notOk(err.message.includes(s), 'the message carries no secret')
  t.notOk(err.message.includes(PUBLIC_KEY), 'nor the public key')
})

t.test('the provider implied by TELNYX_API_KEY is refused the same way', async t => {
  const err = refusal(t, { DATA_DIR: tempDir(t), CPAAS_SIGNATURE: 'none', TELNYX_API_KEY: SECRETS.TELNYX_API_KEY, TELNYX_PUBLIC_KEY: PUBLIC_KEY })
  t.match(err.message, /CPAAS_SIGNATURE=none is refused with CPAAS_PROVIDER=telnyx/)
  t.notOk(err.message.includes(SECRETS.TELNYX_API_KEY))
})

t.test('the signature refusal comes before the missing API key: the first message names the real mistake', async t => {
  const err = refusal(t, { DATA_DIR: tempDir(t), CPAAS_PROVIDER: 'telnyx', CPAAS_SIGNATURE: 'none' })
  t.match(err.message, /CPAAS_SIGNATURE=none is refused/)
})

t.test('none stays legal with the sandbox, explicit or by default', async t => {
  const explicit = loadConfig({ DATA_DIR: tempDir(t), CPAAS_PROVIDER: 'sandbox', CPAAS_SIGNATURE: 'none' })
  t.match(explicit, { provider: 'sandbox', signature: 'none' })
  const byDefault = loadConfig({ DATA_DIR: tempDir(t) })
  t.match(byDefault, { provider: 'sandbox', signature: 'none' })
  const signed = loadConfig({ DATA_DIR: tempDir(t), CPAAS_PROVIDER: 'telnyx', TELNYX_API_KEY: SECRETS.TELNYX_API_KEY, TELNYX_PUBLIC_KEY: PUBLIC_KEY })
  t.match(signed, { provider: 'telnyx', signature: 'telnyx-ed25519' }, 'telnyx defaults to signed callbacks')
})

t.test('npm start stops with exit code 2 and the message on stderr', async t => {
  const main = fileURLToPath(new URL('../../gateway/main.ts', import.meta.url))
  const repo = fileURLToPath(new URL('../../', import.meta.url))
  // Only the variables of this test reach the child: none inherited from the test runner.
  const env: Record<string, string> = {}
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !(k in EnvSchema.properties)) env[k] = v
  Object.assign(env, {
    PORT: '0', DATA_DIR: tempDir(t), CPAAS_PROVIDER: 'telnyx', CPAAS_SIGNATURE: 'none', TELNYX_PUBLIC_KEY: PUBLIC_KEY,
    TELNYX_BASE_URL: 'http://127.0.0.1:9/v2', ...SECRETS, ...NO_CHILD_COVERAGE,
  })
  const child = spawn(process.execPath, ['--import', 'tsx', main], { cwd: repo, env, stdio: ['ignore', 'pipe', 'pipe'] })
  let out = '', errOut = ''
  child.stdout.on('data', (c: Buffer) => { out += c })
  child.stderr.on('data', (c: Buffer) => { errOut += c })
  // Were it not refused, the service would start and listen: stop it, by its own pid.
  const guard = setTimeout(() => child.kill('SIGKILL'), 60_000)
  t.teardown(() => { clearTimeout(guard); if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL') })
  const code = await new Promise<number | null>(resolve => child.on('close', c => resolve(c)))
  t.equal(code, 2, 'a configuration error exits 2')
  t.match(errOut, /^maskline: invalid configuration: CPAAS_SIGNATURE=none is refused with CPAAS_PROVIDER=telnyx/m)
  t.notMatch(out, /listening/, 'nothing was started')
  for (const s of hidden) t.notOk((out + errOut).includes(s), 'no secret on stdout or stderr')
})
