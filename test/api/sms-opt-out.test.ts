// contract D11: SMS opt-out (carrier rules for US long codes), through the provider's SMS
// callback in each provider's dialect, the real telnyx and twilio SDKs and fakes that record what they were asked to send. A party
// who texts STOP to a proxy gets one confirmation and no longer receives messages from that proxy,
// in this session and the next one on the same proxy; the other party's messages to them are
// dropped, recorded FAILED with reason opted_out and reported by sms.blocked. START opts back in,
// HELP answers the tenant's help text; keyword messages are never forwarded.
import t from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import { sql } from 'slonik'
import { loadConfig } from '../../gateway/config.js'
import { startService } from '../../gateway/service.js'
import { createHub } from '../../sql/hub.js'
import { CallbackDriver } from '../support/callback-driver.js'
import { DIALECTS, eventually, startProviderService, startTelnyxService } from '../support/service.js'
import { DEFAULT_SMS_OPT_OUT_TEXT, smsKeyword } from '../../engine/sms-opt-out.js'

interface SmsRow { id: string; direction: string; status: string; reason: string | null }

t.test('keywords: the whole message, trimmed, any case', async t => {
  for (const w of ['STOP', 'stop', ' Stop\n', 'STOPALL', 'unsubscribe', 'Cancel', 'END', 'quit']) t.equal(smsKeyword(w), 'stop', w)
  for (const w of ['START', 'unstop ']) t.equal(smsKeyword(w), 'start', w)
  for (const w of ['HELP', ' info']) t.equal(smsKeyword(w), 'help', w)
  for (const w of ['stop it', 'please stop', 'STOP!', '', 'ENDING', 'hel p', 'x'.repeat(2000)]) t.equal(smsKeyword(w), null, JSON.stringify(w.slice(0, 20)))
})

for (const dialect of DIALECTS) t.test(`opt-out through the SMS callback (${dialect})`, async t => {
  // One proxy number, no cooldown: the next session of this tenant reuses the same proxy.
  const api = await startProviderService(t, dialect, { env: { NUMBER_POOL: 'US:+12025550150', NUMBER_COOLDOWN_SECONDS: '0' } })
  const { driver, fake } = api
  const pool = api.svc.db.pool
  const acct = await api.signup()
  const A = api.phone(1), B = api.phone(2)
  const create = async () => (await api.req('POST', '/v1/sessions', { token: acct.token, body: { agentPhone: A, customerPhone: B, gracePeriodMinutes: 0 } })).body
  const s1 = await create()
  const proxy = s1.proxyNumber as string
  const sent = () => fake.sent
  const list = async (id: string) => (await api.req('GET', `/v1/sessions/${id}/sms`, { token: acct.token })).body.data as SmsRow[]
  let n = 0
  const text = async (from: string, body: string, messageId = `m-${++n}`) => {
    const r = await driver.smsReceived({ from, to: proxy, text: body, messageId })
    t.same([r.status, await r.text()], [200, driver.smsAck], `${body.trim()} acknowledged`)
  }

  await text(B, 'hello from the customer')
  t.match(sent().at(-1), { from: proxy, to: A, text: 'hello from the customer' }, 'forwarded before any STOP')

  await t.test('STOP: one confirmation to the sender, nothing forwarded', async t => {
    const before = sent().length
    await text(A, '  Stop ', 'stop-1')
    t.equal(sent().length, before + 1, 'exactly one message sent')
    t.match(sent().at(-1), { from: proxy, to: A, text: DEFAULT_SMS_OPT_OUT_TEXT }, 'the default confirmation, from the proxy to the sender')
    await text(A, '  Stop ', 'stop-1') // the provider's retry of the same message
    await text(A, 'QUIT') // another opt-out keyword while opted out
    t.equal(sent().length, before + 1, 'the confirmation is sent once')
    const row = await pool.one(sql.unsafe`SELECT * FROM sms_opt_outs`)
    t.match(row, { tenant_id: acct.tenantId, proxy, opted_out: true, stop_message_id: 'stop-1' })
    t.notOk(JSON.stringify(await pool.any(sql.unsafe`SELECT * FROM sms_opt_outs`)).includes(A), 'stored by hash, never the number')
  })

  await t.test("the other party's messages to the opted-out party are dropped, recorded and reported", async t => {
    const before = sent().length
    await text(B, 'are you there?', 'blocked-1')
    await text(B, 'are you there?', 'blocked-1') // retried: one record
    t.equal(sent().length, before, 'nothing sent')
    const rows = (await list(s1.id)).filter(r => r.status === 'FAILED')
    t.match(rows, [{ direction: 'B_TO_A', status: 'FAILED', reason: 'opted_out' }])
    await api.svc.flushRecords()
    const events = await pool.anyFirst(sql.unsafe`SELECT envelope FROM outbox WHERE session_id = ${s1.id} AND type = 'sms.blocked'`) as Array<{ data: Record<string, unknown> }>
    t.equal(events.length, 1, 'one sms.blocked')
    t.same(events[0]!.data, { sessionId: s1.id, tenantId: acct.tenantId, proxyNumber: proxy, direction: 'B_TO_A', smsId: rows[0]!.id, status: 'FAILED', reason: 'opted_out' })
    const usage = await pool.anyFirst(sql.unsafe`SELECT metric FROM billing_events WHERE session_id = ${s1.id} AND metric LIKE 'sms%' ORDER BY metric`)
    t.same(usage, ['sms_received', 'sms_sent'], 'the blocked message bills nothing (the first one only)')
  })

  await t.test('the opted-out party may still text the other party', async t => {
    await text(A, 'one last thing')
    t.match(sent().at(-1), { from: proxy, to: B, text: 'one last thing' })
  })

  await t.test('a new session on the same proxy: still blocked', async t => {
    t.equal((await api.req('POST', `/v1/sessions/${s1.id}/end`, { token: acct.token })).status, 200)
    await api.svc.expireDue()
    const s2 = await create()
    t.equal(s2.proxyNumber, proxy, 'the proxy is reused')
    const before = sent().length
    await text(B, 'new order, same number')
    t.equal(sent().length, before, 'not forwarded')
    t.match(await list(s2.id), [{ status: 'FAILED', reason: 'opted_out' }])
    t.teardown(async () => { await api.req('POST', `/v1/sessions/${s2.id}/end`, { token: acct.token }); await api.svc.expireDue() })
  })

  await t.test('HELP answers the tenant text; texts are tenant-configurable', async t => {
    const patch = await api.req('PATCH', '/v1/config', { token: acct.ownerToken, body: { smsHelpText: 'Acme deliveries: reply STOP to opt out.', smsOptOutText: 'Acme: unsubscribed.' } })
    t.equal(patch.status, 200)
    t.match(patch.body, { smsHelpText: 'Acme deliveries: reply STOP to opt out.', smsOptOutText: 'Acme: unsubscribed.' })
    const before = sent().length
    await text(B, 'help')
    t.equal(sent().length, before + 1)
    t.match(sent().at(-1), { from: proxy, to: B, text: 'Acme deliveries: reply STOP to opt out.' }, 'the help text to the sender, nothing forwarded')
    await text(B, 'STOP')
    t.match(sent().at(-1), { from: proxy, to: B, text: 'Acme: unsubscribed.' }, "the tenant's confirmation")
    await text(B, 'START')
    t.equal(sent().length, before + 2, 'START is not forwarded')
  })

  await t.test('START opts back in', async t => {
    const s3 = await create()
    t.teardown(async () => { await api.req('POST', `/v1/sessions/${s3.id}/end`, { token: acct.token }); await api.svc.expireDue() })
    await text(A, 'unstop')
    const before = sent().length
    await text(B, 'welcome back')
    t.match(sent().at(-1), { from: proxy, to: A, text: 'welcome back' }, 'forwarded again')
    t.equal(sent().length, before + 1, 'START itself was not forwarded')
    await text(A, 'start') // not opted out: an ordinary message, forwarded
    t.match(sent().at(-1), { from: proxy, to: B, text: 'start' })
    t.match(await pool.one(sql.unsafe`SELECT opted_out FROM sms_opt_outs WHERE tenant_id = ${acct.tenantId} AND stop_message_id = 'stop-1'`), { opted_out: false })
  })

  await t.test('a STOP with no live session is honoured for the tenant that held the proxy', async t => {
    const before = sent().length
    await text(A, 'cancel')
    t.equal(sent().length, before + 1)
    t.match(sent().at(-1), { from: proxy, to: A, text: 'Acme: unsubscribed.' })
  })

  await t.test('no log line or event carries a number or a text', async t => {
    await api.svc.flushRecords()
    const envelopes = JSON.stringify(await pool.anyFirst(sql.unsafe`SELECT envelope FROM outbox`))
    for (const secret of [A, B, 'are you there?', 'Acme: unsubscribed.']) {
      t.notOk(envelopes.includes(secret), 'no event carries it')
      t.notOk(api.logLines.some(l => l.includes(secret)), 'no log line carries it')
    }
  })
})

t.test('tenant texts: bounded, validated, RFC 7807 on bad input, null restores the default', async t => {
  const api = await startTelnyxService(t)
  const acct = await api.signup()
  const patch = (body: unknown) => api.req('PATCH', '/v1/config', { token: acct.ownerToken, body })
  for (const [name, body] of [
    ['too long', { smsOptOutText: 'x'.repeat(321) }],
    ['empty', { smsHelpText: '' }],
    ['blank', { smsHelpText: '   ' }],
    ['not a string', { smsOptOutText: 42 }],
  ] as const) {
    const r = await patch(body)
    t.equal(r.status, 400, name)
    t.match(r.headers.get('content-type'), /^application\/problem\+json/)
    t.match(r.body, { type: /\/errors\/validation-error$/, status: 400, errors: [{ field: /^sms(OptOut|Help)Text$/ }] }, name)
  }
  const cur = await api.req('GET', '/v1/config', { token: acct.token })
  t.match(cur.body, { smsOptOutText: null, smsHelpText: null }, 'nothing changed')
  t.match((await patch({ smsOptOutText: 'y'.repeat(320) })).body, { smsOptOutText: 'y'.repeat(320) })
  t.match((await patch({ smsOptOutText: null })).body, { smsOptOutText: null })
})

t.test('another node\'s opt-out reaches this node by the reconciliation sweep', async t => {
  const api = await startTelnyxService(t)
  const { loadOptOutSet } = await import('../../api/cpaas/sms/opt-out.js')
  const acct = await api.signup()
  const here = await loadOptOutSet(api.svc.db.pool, createHub())
  const there = await loadOptOutSet(api.svc.db.pool, createHub()) // another node on the same Postgres
  const k = { tenantId: acct.tenantId, proxy: '+12025550111', partyHash: 'ab'.repeat(32) }
  t.equal(await there.stop(k, 'x-1'), 'confirm')
  t.notOk(here.set.has(k.tenantId, k.proxy, k.partyHash), 'not seen before a sweep (the bus message was lost)')
  await here.sweep()
  t.ok(here.set.has(k.tenantId, k.proxy, k.partyHash), 'seen after the sweep')
  await there.start(k)
  await here.sweep()
  t.notOk(here.set.has(k.tenantId, k.proxy, k.partyHash), 'the opt-in too')
  const again = await loadOptOutSet(api.svc.db.pool, createHub())
  t.equal(again.set.size, 0, 'a boot loads only opted-out parties')
  await there.stop(k, 'x-2')
  t.equal((await loadOptOutSet(api.svc.db.pool, createHub())).set.size, 1, 'a boot after STOP holds it')
  t.equal(await there.stop(k, 'x-3'), 'opted-out', 'a second STOP confirms nothing')
})

t.test('two nodes on one Postgres and one Redis: a STOP on one node blocks on the other at once (the bus)', { skip: !process.env.TEST_REDIS_URL && 'needs TEST_REDIS_URL (the services backend)' }, async t => {
  const api = await startTelnyxService(t)
  const { fake } = api
  const dataDir = mkdtempSync(join(tmpdir(), 'maskline-node2-'))
  // Node 2: the same database, Redis, provider and secrets; a long sweep, so only the bus can tell it.
  const node2 = await startService({
    db: api.svc.db, logDestination: new Writable({ write(_c, _e, cb) { cb() } }),
    config: loadConfig({
      PORT: '0', DATA_DIR: dataDir, LOG_LEVEL: 'warn', REDIS_URL: process.env.TEST_REDIS_URL!, RECONCILE_MS: '600000',
      JWT_SECRET: Buffer.from(api.svc.services.jwtSecret).toString(), PHONE_KEY: api.svc.services.phoneKey.toString('base64'),
      CPAAS_PROVIDER: 'telnyx', TELNYX_API_KEY: 'KEY_test', TELNYX_BASE_URL: fake.baseURL, TELNYX_PUBLIC_KEY: api.keys.publicKeyBase64,
    }),
  })
  t.teardown(async () => { await node2.close(); rmSync(dataDir, { recursive: true, force: true }) })
  const driver2 = new CallbackDriver({ baseUrl: node2.url, mode: 'telnyx-ed25519', keyPair: api.keys, settled: () => node2.flushRecords() })
  const acct = await api.signup()
  const A = api.phone(11), B = api.phone(12)
  const s = (await api.req('POST', '/v1/sessions', { token: acct.token, body: { agentPhone: A, customerPhone: B } })).body
  await eventually(async () => (node2.engine.get(s.id) ? true : undefined), 'the session on node 2')
  await api.driver.smsReceived({ from: A, to: s.proxyNumber, text: 'STOP', messageId: 'two-stop' })
  await new Promise(r => setTimeout(r, 500)) // the bus's propagation (p99 well under 100 ms, docs/scaling.md)
  const r = await driver2.smsReceived({ from: B, to: s.proxyNumber, text: 'are you there?', messageId: 'two-probe' })
  t.same([r.status, await r.json()], [200, { ok: true }])
  const sent = fake.requests.filter(r => r.path === '/v2/messages').map(r => r.body as Record<string, string>)
  t.same(sent.map(m => m.text), [DEFAULT_SMS_OPT_OUT_TEXT], 'only the confirmation was sent: node 2 forwarded nothing to the opted-out party')
})
