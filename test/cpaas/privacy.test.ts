// Contract 1.6 / 5.7, contract D5: no CPaaS module logs or throws a phone number, SMS text, secret or
// signature. Static half: the modules import no logger and print nothing (the sandbox reports a
// forward through a sink typed to take its sandbox id only). Dynamic half: every failure
// path of the providers and breaker yields only codes, and the SDK prints nothing.
import t from 'tap'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { FailoverProvider } from '../../api/cpaas/failover.js'
import { TelnyxProvider } from '../../api/cpaas/telnyx/provider.js'
import { FakeTelnyx } from '../support/fake-telnyx.js'

const root = join(import.meta.dirname, '..', '..')
const MSG = { from: '+12025550100', to: '+12025550142', text: 'meet me at the back door' }
const LEAK = /\+\d{8,15}|meet me|KEY_secret/

t.test('CPaaS modules contain no logging calls', async t => {
  for (const dir of ['api/cpaas', 'api/cpaas/telnyx']) {
    for (const f of readdirSync(join(root, dir)).filter(f => f.endsWith('.ts'))) {
      const src = readFileSync(join(root, dir, f), 'utf8')
      t.notMatch(src, /console\.|from 'pino'|process\.stdout|process\.stderr/, `${dir}/${f}`)
    }
  }
})

t.test('every provider failure carries a code only, and nothing is printed', async t => {
  const api = await FakeTelnyx.start({ apiKey: 'KEY_secret' })
  t.teardown(() => api.close())
  const printed: string[] = []
  const saved = { ...console }
  for (const m of ['log', 'info', 'warn', 'error', 'debug'] as const) console[m] = (...a: unknown[]) => { printed.push(a.map(String).join(' ')) }
  const savedLog = process.env.TELNYX_LOG
  process.env.TELNYX_LOG = 'debug'
  t.teardown(() => {
    Object.assign(console, saved)
    if (savedLog === undefined) delete process.env.TELNYX_LOG; else process.env.TELNYX_LOG = savedLog
  })

  const fp = new FailoverProvider(
    new TelnyxProvider({ apiKey: 'KEY_secret', baseURL: api.baseURL, timeoutMs: 1000 }), // generous: a loaded box must not time out the 400
    undefined,
    { timeoutMs: 1000, failureThreshold: 100 },
  )
  const messages: string[] = []
  for (const b of [{ status: 400 }, { status: 401 }, { status: 500 }, { status: 504 }, { hang: true }, { drop: true }, { body: { data: {} } }, { stallBody: true }]) {
    api.setBehaviour(b)
    const err = await fp.sendSms(MSG).then(() => null, (e: unknown) => e as Error)
    t.ok(err, JSON.stringify(b))
    messages.push(`${err!.message} ${String(err!.stack)} ${JSON.stringify(err)} ${String((err as { cause?: unknown }).cause ?? '')}`)
  }
  for (const m of messages) t.notMatch(m, LEAK)
  t.match(messages.map(m => m.split(' ')[0]), [
    'provider-http-400', 'provider-http-401', 'provider-http-500', 'provider-http-504',
    'provider-timeout', 'provider-connection', 'provider-bad-response', 'provider-timeout',
  ])
  t.same(printed, [], 'the SDK logger stays silent even with TELNYX_LOG=debug')
  for (const s of fp.health()) t.notMatch(JSON.stringify(s), LEAK)
})
