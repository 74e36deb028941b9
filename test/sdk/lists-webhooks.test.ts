// Lists as async iterators across the API's cursor pages, and verifyWebhook on real deliveries
// of the service (test/support/webhook-receiver.ts records them as they arrived).
import t from 'tap'
import { startTestService } from '../support/service.js'
import { startWebhookReceiver } from '../support/webhook-receiver.js'
import { MasklineError, verifyWebhook } from '../../sdk/src/index.js'
import { recordingFetch, sdkTenant } from './sdk-support.js'

t.test('for await over a list follows pagination.after until the last page', async t => {
  const api = await startTestService(t)
  const { fetch, sent } = recordingFetch()
  const { client } = await sdkTenant(api, { fetch })
  const created: string[] = []
  for (let i = 0; i < 5; i++) created.push((await client.sessions.create({ agentPhone: api.phone(20 + i), customerPhone: api.phone(40 + i) })).id)
  await client.sessions.end(created[0]!)

  const before = sent.length
  const seen: string[] = []
  for await (const s of client.sessions.list({ state: 'ACTIVE', limit: 2 })) seen.push(s.id)
  t.same(seen, created.slice(1).reverse(), 'every ACTIVE session once, newest first, across pages')
  const pages = sent.slice(before)
  t.equal(pages.length, 2, 'two pages of two')
  t.ok(pages.every(p => p.path === '/v1/sessions'))

  const first = await client.sessions.list({ limit: 3 }).first()
  t.equal(first.data.length, 3)
  t.type(first.pagination.after, 'string', 'the first page names the next')
  const rest = await client.sessions.list({ limit: 3, after: first.pagination.after! }).all()
  t.same([...first.data, ...rest].map(s => s.id), [...created].reverse(), 'starting from a cursor continues where the page ended')
  let n = 0
  for await (const page of client.sessions.list({ limit: 2 }).pages()) n += page.data.length
  t.equal(n, 5)
  // Leaving the loop early asks for no further page.
  const early = sent.length
  for await (const s of client.sessions.list({ limit: 1 })) { t.ok(s.id); break }
  t.equal(sent.length - early, 1, 'one page fetched')
})

t.test('verifyWebhook returns the event of a real delivery and refuses anything else', async t => {
  const api = await startTestService(t)
  const receiver = await startWebhookReceiver()
  t.teardown(() => receiver.close())
  const { client } = await sdkTenant(api)
  const hook = await client.webhooks.create({ url: receiver.url, events: ['session.created'] })
  api.secrets.add(hook.secret!)
  receiver.setSecret(hook.secret!)
  const s = await client.sessions.create({ agentPhone: api.phone(1), customerPhone: api.phone(2) })
  await receiver.waitFor(1, 15_000)
  const d = receiver.deliveries[0]!
  t.ok(d.verified, 'the receiver\'s own check agrees')

  const event = verifyWebhook(d.body, d.headers, hook.secret!)
  t.match(event, { id: d.id, type: 'session.created', data: { sessionId: s.id, proxyNumber: s.proxyNumber } })
  t.same(verifyWebhook(new TextEncoder().encode(d.body), new Headers(d.headers as Record<string, string>), hook.secret!), event, 'bytes and a Headers object too')

  const refused = (body: string, headers: Record<string, string | string[] | undefined>, secret: string) => {
    try { verifyWebhook(body, headers, secret); return null } catch (e) { return e }
  }
  const tampered = refused(d.body.replace(s.id, s.id.replace(/.$/, c => (c === '0' ? '1' : '0'))), d.headers, hook.secret!)
  t.ok(tampered instanceof MasklineError)
  t.match(tampered, { type: 'webhook-verification' }, 'a changed body')
  t.match(refused(d.body, d.headers, `whsec_${Buffer.alloc(32, 7).toString('base64')}`), { type: 'webhook-verification' }, 'another secret')
  t.match(refused(d.body, { ...d.headers, 'webhook-signature': undefined }, hook.secret!), { type: 'webhook-verification' }, 'no signature')
  const old = String(Math.floor(Date.now() / 1000) - 3600)
  t.match(refused(d.body, { ...d.headers, 'webhook-timestamp': old }, hook.secret!), { type: 'webhook-verification' }, 'an hour-old timestamp')
})
