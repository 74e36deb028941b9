// Contract 4.11 / contract D5 failover, end to end with the REAL telnyx SDK against two fake Telnyx
// APIs: primary fails 5× → OPEN → sends go to the backup → 30 s later (fake clock) a trial
// request closes it again. Health snapshots are checked at every step.
import t, { type Test } from 'tap'
import { FailoverProvider } from '../../api/cpaas/failover.js'
import { TelnyxProvider } from '../../api/cpaas/telnyx/provider.js'
import { ProviderError } from '../../api/cpaas/provider.js'
import { SandboxProvider } from '../../api/cpaas/sandbox-provider.js'
import { FakeTelnyx } from '../support/fake-telnyx.js'

const T0 = Date.UTC(2026, 10, 22, 10, 0, 0)
const MSG = { from: '+12025550100', to: '+12025550142', text: 'see you at 5' }

async function setup(t: Test, timeoutMs = 3000) {
  const primaryApi = await FakeTelnyx.start({ apiKey: 'KEY_primary' })
  const backupApi = await FakeTelnyx.start({ apiKey: 'KEY_backup' })
  t.teardown(async () => { await primaryApi.close(); await backupApi.close() })
  let now = T0
  const fp = new FailoverProvider(
    new TelnyxProvider({ name: 'telnyx', apiKey: 'KEY_primary', baseURL: primaryApi.baseURL, timeoutMs }),
    new TelnyxProvider({ name: 'telnyx-backup', apiKey: 'KEY_backup', baseURL: backupApi.baseURL, timeoutMs }),
    { now: () => now, timeoutMs },
  )
  return { fp, primaryApi, backupApi, advance: (ms: number) => { now += ms }, at: () => now }
}

const snap = (name: string, state: string, openedAt: number | null, lastError: string | null) =>
  ({ name, state, openedAt: openedAt === null ? null : new Date(openedAt).toISOString(), lastError })

t.test('primary 5× 500 → OPEN → backup only → 30 s → trial closes it', async t => {
  const { fp, primaryApi, backupApi, advance } = await setup(t)
  t.same(fp.health(), [snap('telnyx', 'CLOSED', null, null), snap('telnyx-backup', 'CLOSED', null, null)], 'initial health')

  // 1) Healthy primary takes the message.
  t.match(await fp.sendSms(MSG), { providerName: 'telnyx' })
  t.equal(primaryApi.count, 1)
  t.equal(backupApi.count, 0)

  // 2) Primary answers 500: a definite refusal, so each message is resent once via the backup.
  primaryApi.setBehaviour({ status: 500 })
  for (let i = 1; i <= 5; i++) {
    const r = await fp.sendSms(MSG)
    t.equal(r.providerName, 'telnyx-backup', `send ${i} delivered through the backup`)
    t.equal(primaryApi.count, 1 + i, `primary got exactly one request for send ${i} (no SDK retry)`)
    t.equal(backupApi.count, i)
    const state = i < 5 ? 'CLOSED' : 'OPEN'
    t.same(fp.health()[0], snap('telnyx', state, i < 5 ? null : T0, 'provider-http-500'), `primary ${state} after ${i} failures`)
  }
  t.same(fp.health()[1], snap('telnyx-backup', 'CLOSED', null, null))
  t.same(backupApi.requests.at(-1)!.body, { from: MSG.from, to: MSG.to, text: MSG.text }, 'the backup got the same message')

  // 3) OPEN: sends go straight to the backup; the primary is not asked.
  for (let i = 0; i < 3; i++) t.equal((await fp.sendSms(MSG)).providerName, 'telnyx-backup')
  t.equal(primaryApi.count, 6, 'primary untouched while OPEN')
  advance(29_999)
  t.equal((await fp.sendSms(MSG)).providerName, 'telnyx-backup')
  t.same(fp.health()[0], snap('telnyx', 'OPEN', T0, 'provider-http-500'), 'still OPEN just before 30 s')

  // 4) 30 s after opening: HALF_OPEN; the primary has recovered; one trial closes it.
  advance(1)
  t.same(fp.health()[0], snap('telnyx', 'HALF_OPEN', T0, 'provider-http-500'))
  primaryApi.setBehaviour({})
  t.equal((await fp.sendSms(MSG)).providerName, 'telnyx', 'trial request goes to the primary')
  t.equal(primaryApi.count, 7)
  t.same(fp.health(), [snap('telnyx', 'CLOSED', null, 'provider-http-500'), snap('telnyx-backup', 'CLOSED', null, null)])
  t.equal((await fp.sendSms(MSG)).providerName, 'telnyx')
  t.equal(backupApi.count, 9)
})

t.test('a failed trial reopens the primary for another 30 s', async t => {
  const { fp, primaryApi, backupApi, advance, at } = await setup(t)
  primaryApi.setBehaviour({ status: 503 })
  for (let i = 0; i < 5; i++) await fp.sendSms(MSG)
  advance(30_000)
  t.equal(fp.health()[0]!.state, 'HALF_OPEN')
  t.equal((await fp.sendSms(MSG)).providerName, 'telnyx-backup', 'the failed trial is resent through the backup')
  t.equal(primaryApi.count, 6)
  t.same(fp.health()[0], snap('telnyx', 'OPEN', at(), 'provider-http-503'))
  t.equal(backupApi.count, 6)
})

t.test('timeout on the primary: NOT resent (duplicate-SMS risk), but it counts towards OPEN', async t => {
  const { fp, primaryApi, backupApi } = await setup(t, 100)
  primaryApi.setBehaviour({ hang: true })
  for (let i = 1; i <= 5; i++) {
    const err = await fp.sendSms(MSG).then(() => null, (e: unknown) => e)
    t.ok(err instanceof ProviderError)
    t.match(err, { code: 'provider-timeout', ambiguous: true })
    t.equal(backupApi.count, 0, `not resent through the backup (${i})`)
  }
  t.equal(primaryApi.count, 5)
  t.match(fp.health()[0], { state: 'OPEN', lastError: 'provider-timeout' })
  t.equal((await fp.sendSms(MSG)).providerName, 'telnyx-backup', 'new sends go to the backup once OPEN')
})

t.test('a 4xx refusal is neither resent nor counted', async t => {
  const { fp, primaryApi, backupApi } = await setup(t)
  primaryApi.setBehaviour({ status: 422 })
  for (let i = 0; i < 6; i++) await t.rejects(fp.sendSms(MSG), { code: 'provider-http-422' })
  t.equal(backupApi.count, 0)
  t.same(fp.health()[0], snap('telnyx', 'CLOSED', null, null))
})

t.test('both OPEN, or primary OPEN without a backup: provider-circuit-open, nothing sent', async t => {
  const { fp, primaryApi, backupApi } = await setup(t)
  primaryApi.setBehaviour({ status: 500 })
  backupApi.setBehaviour({ status: 500 })
  for (let i = 0; i < 5; i++) await t.rejects(fp.sendSms(MSG), { code: 'provider-http-500' })
  t.same(fp.health().map(s => s.state), ['OPEN', 'OPEN'])
  const before = primaryApi.count + backupApi.count
  await t.rejects(fp.sendSms(MSG), { code: 'provider-circuit-open' })
  t.equal(primaryApi.count + backupApi.count, before)

  let now = T0
  const solo = new FailoverProvider(new TelnyxProvider({ apiKey: 'KEY_primary', baseURL: primaryApi.baseURL }), undefined, { now: () => now })
  for (let i = 0; i < 5; i++) await t.rejects(solo.sendSms(MSG), { code: 'provider-http-500' })
  await t.rejects(solo.sendSms(MSG), { code: 'provider-circuit-open', ambiguous: false })
  t.equal(solo.health().length, 1, 'health lists the primary only')
  now += 30_000
  t.equal(solo.health()[0]!.state, 'HALF_OPEN')
})

t.test('works with any SmsProvider (sandbox as primary)', async t => {
  const fp = new FailoverProvider(new SandboxProvider())
  t.match(await fp.sendSms(MSG), { providerName: 'sandbox', providerMessageId: /^sandbox-/ })
  t.same(fp.health(), [snap('sandbox', 'CLOSED', null, null)])
})
