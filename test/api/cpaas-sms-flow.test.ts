// SMS relayed in both directions through the real HTTP service, in each provider's dialect (the real
// telnyx and twilio SDKs against a fake of each; contract 1.5, 4.10; contract D5): the customer B → the agent A and A → B, each from the
// proxy; a replayed `message.received` forwarded once; delivery statuses that arrive out of order
// never move a status backwards (QUEUED < SENT < DELIVERED | FAILED).
import t from 'tap'
import { sql } from 'slonik'
import { DIALECTS, eventually, startProviderService } from '../support/service.js'

interface SmsRow { id: string; direction: string; status: string; deliveredAt: string | null }

for (const dialect of DIALECTS) t.test(`sms in both directions (${dialect})`, async t => {
  const api = await startProviderService(t, dialect)
  const { driver, fake } = api
  const pool = api.svc.db.pool
  const acct = await api.signup()
  const A = api.phone(1), B = api.phone(2)
  const s = (await api.req('POST', '/v1/sessions', { token: acct.token, body: { agentPhone: A, customerPhone: B } })).body
  const texts = { fromB: 'the gate code is blue door 4417', fromA: 'on my way, ten minutes' }

  const list = async () => (await api.req('GET', `/v1/sessions/${s.id}/sms`, { token: acct.token })).body.data as SmsRow[]
  const byDirection = async (direction: string) => (await list()).find(r => r.direction === direction)
  const until = (direction: string, status: string) =>
    eventually(async () => { const r = await byDirection(direction); return r?.status === status ? r : undefined }, `${direction} ${status}`)
  const byId = async (id: string) => (await list()).find(r => r.id === id)
  const forwardId = async (id: string) => (await pool.oneFirst(sql.unsafe`SELECT forward_message_id FROM sms_records WHERE id = ${id}`)) as string
  const ids = { toA: '', toB: '' }

  t.test('customer → agent, replayed once', async t => {
    const r = await driver.smsReceived({ from: B, to: s.proxyNumber, text: texts.fromB, messageId: 'in-B-1' })
    t.equal(r.status, 200)
    t.equal(await r.text(), driver.smsAck)
    const replay = await driver.smsReceived({ from: B, to: s.proxyNumber, text: texts.fromB, messageId: 'in-B-1' })
    t.equal(await replay.text(), driver.smsAck, 'the replay is acknowledged too')
    const row = await until('B_TO_A', 'SENT')
    t.match(row, { status: 'SENT', deliveredAt: null })
    ids.toA = row.id
    t.equal(fake.count, 1, 'forwarded exactly once')
    t.match(fake.sent[0], { from: s.proxyNumber, to: A, text: texts.fromB, webhook: new RegExp(`${driver.basePath}/sms$`) }, 'from the proxy to the agent')
  })

  t.test('agent → customer', async t => {
    await driver.smsReceived({ from: A, to: s.proxyNumber, text: texts.fromA, messageId: 'in-A-1' })
    ids.toB = (await until('A_TO_B', 'SENT')).id
    t.equal(fake.count, 2)
    t.match(fake.sent[1], { from: s.proxyNumber, to: B, text: texts.fromA, webhook: new RegExp(`${driver.basePath}/sms$`) }, 'from the proxy to the customer')
    t.equal((await list()).length, 2, 'one record per message, not per delivery')
  })

  t.test('statuses out of order: finalized before sent ends DELIVERED; a failed finalize ends FAILED', async t => {
    const toA = await forwardId(ids.toA), toB = await forwardId(ids.toB)
    await driver.smsStatus({ messageId: toA, eventType: 'message.finalized', status: 'delivered' })
    await driver.smsStatus({ messageId: toA, eventType: 'message.sent', status: 'sent' })
    await driver.smsStatus({ messageId: toB, eventType: 'message.finalized', status: 'delivery_failed' })
    await driver.smsStatus({ messageId: toB, eventType: 'message.sent', status: 'sent' })
    await driver.smsStatus({ messageId: toB, eventType: 'message.finalized', status: 'delivered' })
    // Status updates are applied in arrival order; a third message is a marker behind them all.
    await driver.smsReceived({ from: B, to: s.proxyNumber, text: 'marker', messageId: 'in-B-2' })
    await eventually(async () => ((await list()).length === 3 ? true : undefined), 'the marker message')
    t.match(await byId(ids.toA), { status: 'DELIVERED', deliveredAt: String }, 'DELIVERED stays after a late message.sent')
    t.match(await byId(ids.toB), { status: 'FAILED', deliveredAt: null }, 'FAILED stays: not back to SENT, not over to DELIVERED')
  })

  t.test('events, usage, and the text stored nowhere', async t => {
    const types = await eventually(async () => {
      const e = await pool.anyFirst(sql.unsafe`SELECT type FROM outbox WHERE session_id = ${s.id} AND type LIKE 'sms.%' ORDER BY id`)
      return e.length >= 6 ? e : undefined
    }, 'six sms events')
    t.same(types, ['sms.received', 'sms.sent', 'sms.received', 'sms.sent', 'sms.received', 'sms.sent'], 'one received + sent per message, the replay none')
    const usage = await pool.any(sql.unsafe`SELECT metric, count(*)::int AS n FROM billing_events WHERE session_id = ${s.id} AND metric LIKE 'sms%' GROUP BY metric ORDER BY metric`)
    t.same(usage, [{ metric: 'sms_received', n: 3 }, { metric: 'sms_sent', n: 3 }])
    const stored = JSON.stringify(await pool.any(sql.unsafe`SELECT * FROM sms_records`)) + JSON.stringify(await pool.any(sql.unsafe`SELECT envelope FROM outbox`))
    for (const text of Object.values(texts)) {
      t.notOk(stored.includes(text), 'no record or event carries the text')
      t.notOk(api.logLines.some(l => l.includes(text)), 'no log line carries the text')
    }
  })
})

for (const dialect of DIALECTS) t.test(`a delivery status that arrives before the send has stored the forwarded id is applied after it (${dialect})`, async t => {
  const api = await startProviderService(t, dialect)
  const { driver, fake } = api
  const acct = await api.signup()
  const A = api.phone(1), B = api.phone(2)
  const s = (await api.req('POST', '/v1/sessions', { token: acct.token, body: { agentPhone: A, customerPhone: B } })).body
  // The provider answers the send late; its status webhook for that message comes first.
  fake.enqueue({ latencyMs: 600, body: dialect === 'twilio'
    ? { sid: 'fwd-early-1', status: 'queued', to: A }
    : { data: { record_type: 'message', id: 'fwd-early-1', type: 'SMS', to: [{ phone_number: A, status: 'queued' }] } } })
  await driver.smsReceived({ from: B, to: s.proxyNumber, text: 'early status', messageId: 'in-early-1' })
  await eventually(async () => (fake.count === 1 ? true : undefined), 'the send reached the provider')
  const r = await driver.smsStatus({ messageId: 'fwd-early-1', eventType: 'message.finalized', status: 'delivered' })
  t.equal(r.status, 200)
  const row = await eventually(async () => {
    const list = (await api.req('GET', `/v1/sessions/${s.id}/sms`, { token: acct.token })).body.data as SmsRow[]
    return list[0]?.status === 'DELIVERED' ? list[0] : undefined
  }, 'the early status applied')
  t.match(row, { status: 'DELIVERED', deliveredAt: String })
})
