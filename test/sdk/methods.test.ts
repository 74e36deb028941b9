// Every method of the SDK (sdk/src) called once against the real service, with the answers the
// generated types promise; and every tenant endpoint of the service's OpenAPI document reached by
// one of them (the requests the SDK sent, matched against the document's operations), so an
// endpoint added to the API without an SDK method fails here.
import t from 'tap'
import { startTestService } from '../support/service.js'
import { startWebhookReceiver } from '../support/webhook-receiver.js'
import { MasklineError } from '../../sdk/src/index.js'
import { isProviderCallback, operations, recordingFetch, sdkTenant } from './sdk-support.js'

t.test('every SDK method once; every tenant endpoint of the OpenAPI document has one', async t => {
  const api = await startTestService(t)
  const receiver = await startWebhookReceiver()
  t.teardown(() => receiver.close())
  const { fetch, sent } = recordingFetch()
  const { pub, client, dashboard, signed, email, password } = await sdkTenant(api, { fetch })
  const A = api.phone(11), B = api.phone(12), C = api.phone(13), D = api.phone(14)
  for (const p of [A, B, C, D]) api.partyNumbers.add(p)

  // auth (the clients trade their credentials themselves; these are the endpoints as methods)
  t.match(await pub.auth.exchange({ apiKey: signed.apiKey, apiSecret: signed.apiSecret }), { tokenType: 'Bearer', expiresIn: 900 })
  t.match(await pub.auth.login({ email, password }), { user: { email, role: 'OWNER' }, tenant: { id: signed.tenantId } })

  // sessions
  const s = await client.sessions.create({ agentPhone: A, customerPhone: B, metadata: { order: 'o-1' } })
  t.match(s, { state: 'ACTIVE', tenantId: signed.tenantId, metadata: { order: 'o-1' } })
  t.equal((await client.sessions.get(s.id)).id, s.id)
  t.match(await client.sessions.verify(A), { verified: true })
  t.match(await client.sessions.update(s.id, { metadata: { note: 'n' } }), { metadata: { order: 'o-1', note: 'n' } })
  t.equal((await client.sessions.swapTarget(s.id, C)).proxyNumber, s.proxyNumber)
  t.ok((await client.sessions.list({ state: 'ACTIVE' }).all()).some(x => x.id === s.id))
  // a routed call and an inbound SMS through the provider's callbacks, so the record lists have rows
  t.equal((await api.driver.voice({ from: C, to: s.proxyNumber, callSid: 'sdk-call-1' })).status, 200)
  t.equal((await api.driver.smsReceived({ from: A, to: s.proxyNumber, text: 'hello', messageId: 'sdk-sms-1' })).status, 200)
  await api.svc.flushRecords()
  const calls = await client.sessions.calls(s.id).all()
  t.equal(calls.length, 1, 'the session has its call')
  t.equal((await client.sessions.sms(s.id).all()).length, 1, 'and its SMS record')
  t.same((await client.calls.list({ sessionId: s.id }).all()).map(c => c.id), [calls[0]!.id])
  t.equal((await client.calls.get(calls[0]!.id)).id, calls[0]!.id)

  // config and tenant
  t.match(await client.config.get(), { smsHelpText: null })
  t.match(await dashboard.config.update({ smsHelpText: 'Reply STOP to stop.' }), { smsHelpText: 'Reply STOP to stop.' })
  t.equal((await client.config.tenant()).tenant.id, signed.tenantId)

  // analytics and billing
  const period = { periodStart: new Date(Date.now() - 86_400_000).toISOString(), periodEnd: new Date(Date.now() + 60_000).toISOString() }
  t.ok(await client.analytics.usage(period))
  t.ok(await client.analytics.sessionsOverTime(period))
  t.ok(await client.analytics.callSuccessRate(period))
  t.ok(await client.analytics.calls(period))
  t.ok(await client.billing.usage(period))
  t.match(await client.billing.events(period), { events: Array })
  t.ok(Array.isArray(await client.billing.periods().all()))
  t.match(await client.billing.pricing(), { tiers: Array })

  // devices and presence
  await client.devices.registerToken({ userPhone: A, token: 'push-token-sdk-1', platform: 'ios' })
  await client.devices.setPresence({ userPhone: A, status: 'online', platform: 'ios' })
  t.match(await client.devices.presence(A), { status: 'online' })
  await client.devices.removeToken({ token: 'push-token-sdk-1' })

  // numbers: the pool, and provisioning, which the service does not do (501 as a MasklineError)
  t.ok(await client.numbers.pool())
  const provision = await dashboard.numbers.provision({ region: 'US', count: 1 }).catch((e: unknown) => e)
  t.match(provision, { name: 'MasklineError', status: 501 })
  t.ok(provision instanceof MasklineError)

  // webhooks
  const hook = await client.webhooks.create({ url: receiver.url, events: ['session.created'] })
  t.match(hook, { url: receiver.url, secret: /^whsec_/ })
  t.match(await client.webhooks.list(), { url: receiver.url })
  t.ok(await client.webhooks.test())
  await receiver.waitFor(1, 10_000)
  t.ok(Array.isArray(await client.webhooks.logs().all()))

  // the operator console's API, with the dashboard login
  t.match(await dashboard.console.overview({ minutes: 5 }), { sessions: { ACTIVE: Number } })
  t.match(await dashboard.console.timeline(s.id), { data: Array, truncated: false })
  t.ok((await dashboard.console.sessions.list().all()).some(x => x.id === s.id))
  t.equal((await dashboard.console.sessions.get(s.id)).id, s.id)
  t.equal((await dashboard.console.sessions.calls(s.id).all()).length, 1)
  t.equal((await dashboard.console.sessions.sms(s.id).all()).length, 1)
  t.equal((await dashboard.console.sessions.swapTarget(s.id, D)).id, s.id)
  t.equal((await dashboard.console.sessions.update(s.id, { gracePeriodMinutes: 5 })).gracePeriodMinutes, 5)
  t.ok(await dashboard.console.numbers.pool())
  t.match(await dashboard.console.webhooks.list(), { url: receiver.url })
  t.ok(Array.isArray(await dashboard.console.webhooks.logs().all()))
  t.ok(await dashboard.console.webhooks.test())
  t.equal((await dashboard.console.sessions.end(s.id)).state, 'GRACE_PERIOD')
  const s2 = await client.sessions.create({ agentPhone: A, customerPhone: B })
  t.equal((await client.sessions.end(s2.id)).state, 'GRACE_PERIOD')

  // health and the document itself
  t.match(await pub.health.live(), { status: String })
  t.ok(await pub.health.ready())
  t.ok(await pub.health.cpaas())
  const doc = await pub.openapi()
  t.equal(doc.openapi, '3.1.0')

  // the Twilio Proxy façade's credentials (docs/twilio-proxy.md)
  t.match(await dashboard.twilioProxy.get(), { accountSid: null })
  const issued = await dashboard.twilioProxy.issue()
  api.secrets.add(issued.authToken)
  t.match(issued, { accountSid: /^AC[0-9a-f]{32}$/, authToken: /^[0-9a-f]{32}$/ })
  t.equal((await dashboard.twilioProxy.get()).accountSid, issued.accountSid)
  const key = await dashboard.twilioProxy.createApiKey()
  api.secrets.add(key.secret)
  t.match(key, { sid: /^SK[0-9a-f]{32}$/, accountSid: issued.accountSid })
  await dashboard.twilioProxy.revokeApiKey(key.sid)

  // last: the key pair is replaced, the old one refused
  const rotated = await dashboard.auth.rotateKey()
  api.secrets.add(rotated.apiSecret)
  t.not(rotated.apiKey, signed.apiKey)

  const ops = operations(doc).filter(o => !isProviderCallback(o.path))
  const reached = ops.filter(o => sent.some(r => o.matches(r.method, r.path)))
  t.same(ops.filter(o => !reached.includes(o)).map(o => `${o.method} ${o.path}`), [], 'every endpoint but the provider callbacks was called through an SDK method')
  t.same(sent.filter(r => !ops.some(o => o.matches(r.method, r.path))).map(r => `${r.method} ${r.path}`), [], 'the SDK called nothing outside the document')
  t.same(sent.filter(r => r.status >= 400 && r.path !== '/v1/numbers/provision').map(r => `${r.method} ${r.path} ${r.status}`), [], 'no other call failed')
})
