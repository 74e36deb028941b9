// SMS relay (contract 1.5, 1.6, 4.10; contract D5) in each provider's dialect, through the real
// telnyx and twilio SDKs against a fake of each:
// forwarded from the proxy, acknowledged only once the forward is handed to the provider (503 +
// Retry-After when the provider is too slow for the 2 s answer budget), idempotent on the
// provider's message id, metadata-only records, delivery status updates, text never stored.
import t from 'tap'
import { sql } from 'slonik'
import { DIALECTS, eventually, startProviderService } from '../support/service.js'

for (const dialect of DIALECTS) t.test(`sms relay (${dialect})`, async t => {
  const api = await startProviderService(t, dialect)
  const { driver, fake } = api
  const acct = await api.signup()
  const A = api.phone(1), B = api.phone(2)
  const s = (await api.req('POST', '/v1/sessions', { token: acct.token, body: { agentPhone: A, customerPhone: B } })).body
  const secretText = 'meet at the blue door 4417'

  fake.setBehaviour({ latencyMs: 300 })
  const t0 = Date.now()
  const r = await driver.smsReceived({ from: B, to: s.proxyNumber, text: secretText, messageId: 'msg-1' })
  t.equal(r.status, 200)
  t.equal(await r.text(), driver.smsAck)
  t.ok(Date.now() - t0 >= 300, 'acknowledged only once the provider took the forward')
  t.equal(fake.count, 1, 'handed over before the answer')
  const replay = await driver.smsReceived({ from: B, to: s.proxyNumber, text: secretText, messageId: 'msg-1' })
  t.same([replay.status, await replay.text()], [200, driver.smsAck], 'a replay is acknowledged')

  const list = await api.req('GET', `/v1/sessions/${s.id}/sms`, { token: acct.token })
  t.equal(fake.count, 1, 'forwarded exactly once despite the replay')
  t.match(fake.sent[0], { from: s.proxyNumber, to: A, text: secretText, webhook: new RegExp(`${driver.basePath}/sms$`) }, 'delivery statuses come back to this provider\'s callback')

  t.equal(list.body.data.length, 1)
  t.match(list.body.data[0], { sessionId: s.id, direction: 'B_TO_A', status: 'SENT', sentAt: String })
  t.notOk(JSON.stringify(list.body).includes(secretText))

  const stored = JSON.stringify(await api.svc.db.pool.any(sql.unsafe`SELECT * FROM sms_records`))
  t.notOk(stored.includes(secretText), 'the text is not stored')
  const fwd = await api.svc.db.pool.oneFirst(sql.unsafe`SELECT forward_message_id FROM sms_records WHERE session_id = ${s.id}`) as string
  await driver.smsStatus({ messageId: fwd, eventType: 'message.finalized', status: 'delivered' })
  const after = await eventually(async () => {
    const r = await api.req('GET', `/v1/sessions/${s.id}/sms`, { token: acct.token })
    return r.body.data?.[0]?.status === 'DELIVERED' ? r : undefined
  }, 'the delivery status recorded')
  t.match(after.body.data[0], { status: 'DELIVERED', deliveredAt: String })

  await api.svc.flushRecords() // events are written behind the answer (group commit): no sleep, the writer's own barrier
  const outbox = await api.svc.db.pool.anyFirst(sql.unsafe`SELECT type FROM outbox WHERE session_id = ${s.id} AND type LIKE 'sms.%' ORDER BY id`)
  t.same(outbox, ['sms.received', 'sms.sent'])
  const usage = await api.svc.db.pool.anyFirst(sql.unsafe`SELECT metric FROM billing_events WHERE session_id = ${s.id} AND metric LIKE 'sms%' ORDER BY metric`)
  t.same(usage, ['sms_received', 'sms_sent'])

  fake.setBehaviour({})
  const stranger = await driver.smsReceived({ from: api.phone(77), to: s.proxyNumber, text: 'hello', messageId: 'msg-2' })
  t.equal(await stranger.text(), driver.smsAck, 'unmatched SMS are acknowledged and dropped')
  // A forward is handed over before the answer, so none is coming; the exact count after the
  // next message's forward below would also show a late one.
  t.equal(fake.count, 1)

  // Too slow for the answer budget: 503 + Retry-After, never an acknowledgement of a message
  // that only lives in memory. The provider's retries wait for the same forward: sent once.
  fake.setBehaviour({ latencyMs: 2500 })
  const slow = await driver.smsReceived({ from: B, to: s.proxyNumber, text: secretText, messageId: 'msg-3' })
  t.equal(slow.status, 503)
  t.equal(slow.headers.get('retry-after'), '5')
  fake.setBehaviour({})
  await eventually(async () => {
    const again = await driver.smsReceived({ from: B, to: s.proxyNumber, text: secretText, messageId: 'msg-3' })
    return again.status === 200 ? true : undefined
  }, 'a retry acknowledged once the forward is handed over')
  t.equal(fake.count, 2, 'the slow message is forwarded once')
  for (const line of api.logLines) t.notOk(line.includes(secretText), 'no log line carries the text')
})
