// The sandbox provider (contract D1): callbacks are not signature-checked; an SMS is "forwarded"
// nowhere, recorded DELIVERED, and logged without numbers or text.
// - Through the real service started as `npm start` does with nothing configured (the sandbox is
//   the default): the inbound SMS is acknowledged, forwarded through the sandbox, its record ends
//   DELIVERED with sms.received then sms.sent (DELIVERED), and no log line, record or event holds
//   a number or the text.
// - The provider's own log line, written through the service's logger (api/log.ts): the sandbox id
//   and nothing else of the message.
import t from 'tap'
import { Writable } from 'node:stream'
import { sql } from 'slonik'
import { createLogger } from '../../api/log.js'
import { SandboxProvider } from '../../api/cpaas/sandbox-provider.js'
import { eventually, startTestService } from '../support/service.js'

t.test('an inbound SMS through the sandbox service is forwarded and recorded DELIVERED', async t => {
  const api = await startTestService(t)
  const pool = api.svc.db.pool
  const health = await api.req('GET', '/v1/health/cpaas')
  t.match(health.body.providers, [{ name: 'sandbox', state: 'CLOSED' }], 'the service runs on the sandbox provider')
  t.equal(api.driver.mode, 'none', 'callbacks go unsigned')

  const acct = await api.signup()
  const A = api.phone(1), B = api.phone(2)
  const s = (await api.req('POST', '/v1/sessions', { token: acct.token, body: { agentPhone: A, customerPhone: B } })).body
  const text = 'the sandbox keeps this to itself 5521'

  const r = await api.driver.smsReceived({ from: B, to: s.proxyNumber, text, messageId: 'sandbox-in-1' })
  t.equal(r.status, 200)
  t.equal(await r.text(), '{"ok":true}')

  // Polled in Postgres: polling the API would spend the tenant's rate limit.
  const forwardId = await eventually(async () => {
    const id = await pool.maybeOneFirst(sql.unsafe`SELECT forward_message_id FROM sms_records WHERE session_id = ${s.id} AND status = 'DELIVERED'`)
    return (id as string | null) ?? undefined
  }, 'the SMS recorded DELIVERED')
  t.match(forwardId, /^sandbox-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/, 'forwarded through the sandbox')
  // contract D1: the sandbox logs the forward, without numbers or text.
  const sandboxLines = api.logLines.map(l => JSON.parse(l) as Record<string, unknown>).filter(l => l.provider === 'sandbox' && 'providerMessageId' in l)
  t.match(sandboxLines, [{ level: 30, providerMessageId: forwardId, msg: /sandbox/ }], 'the forward is logged once, by its sandbox id')
  t.equal(sandboxLines.length, 1)

  const list = await api.req('GET', `/v1/sessions/${s.id}/sms`, { token: acct.token })
  t.equal(list.status, 200)
  t.equal(list.body.data.length, 1)
  t.match(list.body.data[0], { sessionId: s.id, direction: 'B_TO_A', status: 'DELIVERED', sentAt: String, deliveredAt: String })

  const events = await eventually(async () => {
    const e = await pool.any(sql.unsafe`SELECT type, envelope->'data' AS data FROM outbox WHERE session_id = ${s.id} AND type LIKE 'sms.%' ORDER BY id`)
    return e.length >= 2 ? e : undefined
  }, 'the sms events')
  const base = { sessionId: s.id, tenantId: acct.tenantId, proxyNumber: s.proxyNumber, direction: 'B_TO_A' }
  t.match(events, [{ type: 'sms.received', data: { ...base, status: 'QUEUED' } }, { type: 'sms.sent', data: { ...base, status: 'DELIVERED' } }])
  t.equal(events.length, 2)
  const usage = await pool.anyFirst(sql.unsafe`SELECT metric FROM billing_events WHERE session_id = ${s.id} AND metric LIKE 'sms%' ORDER BY metric`)
  t.same(usage, ['sms_received', 'sms_sent'])

  const stored = JSON.stringify(await pool.any(sql.unsafe`SELECT * FROM sms_records`)) + JSON.stringify(await pool.anyFirst(sql.unsafe`SELECT envelope FROM outbox`))
  t.notOk(stored.includes(text), 'no record or event holds the text')
  // The harness fails the test on any `+<digits>` in a log line; the digits alone and the text are
  // checked here as well.
  const numbers = [A, B, s.proxyNumber].map(n => n.slice(1))
  const leaky = api.logLines.filter(l => l.includes(text) || numbers.some(n => l.includes(n)))
  t.same(leaky, [], 'no log line carries a number or the text')
})

t.test('the sandbox logs each message by its sandbox id only', async t => {
  const lines: string[] = []
  const log = createLogger({ level: 'info', destination: new Writable({ write(chunk, _enc, cb) { lines.push(String(chunk)); cb() } }) })
  const provider = new SandboxProvider('sandbox', log)
  const msg = { from: '+12025550100', to: '+14155551002', text: 'meet at the blue door 4417', webhookUrl: 'http://127.0.0.1:8080/v1/webhooks/cpaas/sms' }
  const sent = await provider.sendSms(msg)
  const again = await provider.sendSms(msg)

  t.equal(lines.length, 2, 'one line per message')
  const first = JSON.parse(lines[0]!) as Record<string, unknown>
  t.match(first, { level: 30, service: 'maskline', provider: 'sandbox', providerMessageId: sent.providerMessageId, msg: /sandbox/ })
  t.same(Object.keys(first).sort(), ['level', 'msg', 'provider', 'providerMessageId', 'service', 'time'], 'nothing of the message but the sandbox id')
  t.match(JSON.parse(lines[1]!), { providerMessageId: again.providerMessageId })
  for (const line of lines) {
    for (const secret of [msg.from, msg.to, msg.from.slice(1), msg.to.slice(1), msg.text, msg.webhookUrl]) t.notOk(line.includes(secret), 'no number, text or URL')
    t.notMatch(line, /redacted/, 'the fields were never handed to the logger')
  }
})
