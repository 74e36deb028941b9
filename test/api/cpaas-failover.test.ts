// Failover over HTTP (contract 4.11, contract D5): the running service forwards SMS through the real
// telnyx SDK to a primary and a backup fake Telnyx. The primary fails 5 times → its breaker is OPEN
// → sends go to the backup → after the 30 s cool-off (the service clock is moved, nobody sleeps) one
// trial request closes it again. GET /v1/health/cpaas, read from the service, shows every step.
import t from 'tap'
import { eventually, startTelnyxService } from '../support/service.js'

t.test('primary breaker over HTTP: CLOSED → OPEN → HALF_OPEN → CLOSED', async t => {
  let offset = 0
  const clock = () => Date.now() + offset
  const api = await startTelnyxService(t, { backup: true, now: clock })
  const { driver, fake: primary } = api
  const backup = api.backupFake!
  const acct = await api.signup()
  const A = api.phone(1), B = api.phone(2)
  const s = (await api.req('POST', '/v1/sessions', { token: acct.token, body: { agentPhone: A, customerPhone: B } })).body

  const health = async () => {
    const r = await api.req('GET', '/v1/health/cpaas')
    t.equal(r.status, 200)
    return r.body.providers as Array<{ name: string; state: string; openedAt: string | null; lastError: string | null }>
  }
  let sent = 0
  /** The customer texts the proxy; resolves once the forward is recorded SENT. */
  async function relay() {
    const n = ++sent
    await driver.smsReceived({ from: B, to: s.proxyNumber, text: `message ${n}`, messageId: `fo-${n}` })
    await eventually(async () => {
      const rows = (await api.req('GET', `/v1/sessions/${s.id}/sms`, { token: acct.token })).body.data as Array<{ status: string }>
      return rows.length === n && rows.every(r => r.status === 'SENT') ? true : undefined
    }, `forward ${n} recorded SENT`)
  }
  const closed = (name: string, lastError: string | null = null) => ({ name, state: 'CLOSED', openedAt: null, lastError })

  t.same(await health(), [closed('telnyx'), closed('telnyx-backup')], 'both CLOSED at start')
  await relay()
  t.equal(primary.count, 1, 'a healthy primary takes the message')
  t.equal(backup.count, 0)

  primary.setBehaviour({ status: 500 })
  let beforeOpen = 0
  for (let i = 1; i <= 5; i++) {
    if (i === 5) beforeOpen = clock()
    await relay()
    t.equal(primary.count, 1 + i, `failure ${i}: the primary was asked once`)
    t.equal(backup.count, i, `failure ${i}: the message went out through the backup`)
    if (i < 5) t.same((await health())[0], closed('telnyx', 'provider-http-500'), `CLOSED after ${i} failures`)
  }
  const open = await health()
  t.match(open[0], { name: 'telnyx', state: 'OPEN', openedAt: String, lastError: 'provider-http-500' }, 'OPEN after 5 failures')
  const openedAt = Date.parse(open[0]!.openedAt!)
  t.ok(openedAt >= beforeOpen && openedAt <= clock(), 'openedAt is the time of the fifth failure')
  t.notMatch(open[0]!.lastError, /\d{7}/, 'lastError carries no phone number')
  for (const n of [A, B, s.proxyNumber]) t.notOk(JSON.stringify(open).includes(n.slice(1)))
  t.same(open[1], closed('telnyx-backup'))
  t.equal(backup.requests.at(-1)!.headers.authorization, 'Bearer KEY_backup', 'the backup is called with its own key')

  await relay()
  t.equal(primary.count, 6, 'OPEN: the primary is not asked')
  t.equal(backup.count, 6)

  offset += 30_000
  t.match((await health())[0], { name: 'telnyx', state: 'HALF_OPEN', openedAt: open[0]!.openedAt, lastError: 'provider-http-500' }, 'HALF_OPEN after the cool-off')
  primary.setBehaviour({})
  await relay()
  t.equal(primary.count, 7, 'the trial request goes to the primary')
  t.equal(backup.count, 6)
  t.same(await health(), [closed('telnyx', 'provider-http-500'), closed('telnyx-backup')], 'the successful trial closes it')
  await relay()
  t.equal(primary.count, 8, 'sends go to the primary again')
  t.equal(backup.count, 6)
})
