// Failover between Telnyx and Twilio over HTTP (the real telnyx and twilio SDKs against a fake of
// each): the pool's numbers are declared on both providers (NUMBER_POOL `@twilio+telnyx`, and the
// other way round), an inbound message comes in on the first provider's webhooks, its forward
// fails there (HTTP 500: nothing was sent) and goes out once through the other, from the same
// proxy number, with that provider's own delivery-status callback. GET /v1/health/cpaas shows
// both providers' breakers, and calls on either provider's webhooks are answered in its dialect.
import t from 'tap'
import { CallbackDriver, generateTelnyxKeyPair } from '../support/callback-driver.js'
import { FakeTelnyx } from '../support/fake-telnyx.js'
import { FAKE_ACCOUNT_SID, FAKE_AUTH_TOKEN, FakeTwilio } from '../support/fake-twilio.js'
import { eventually, startTestService } from '../support/service.js'

for (const [first, second] of [['twilio', 'telnyx'], ['telnyx', 'twilio']] as const) {
  t.test(`a forward that fails on ${first} goes out through ${second}`, async t => {
    const keys = generateTelnyxKeyPair()
    const telnyx = await FakeTelnyx.start({ apiKey: 'KEY_test' })
    const twilio = await FakeTwilio.start()
    t.teardown(() => Promise.all([telnyx.close(), twilio.close()]))
    const api = await startTestService(t, {
      env: {
        CPAAS_PROVIDER: first, NUMBER_POOL: `US:+12025550100-+12025550109@${first}+${second}`,
        TELNYX_API_KEY: 'KEY_test', TELNYX_BASE_URL: telnyx.baseURL, TELNYX_PUBLIC_KEY: keys.publicKeyBase64,
        TWILIO_ACCOUNT_SID: FAKE_ACCOUNT_SID, TWILIO_AUTH_TOKEN: FAKE_AUTH_TOKEN, TWILIO_BASE_URL: twilio.baseUrl,
      },
    })
    api.secrets.add(FAKE_AUTH_TOKEN)
    const drivers = {
      twilio: new CallbackDriver({ baseUrl: api.url, mode: 'twilio', hmacSecret: FAKE_AUTH_TOKEN, settled: () => api.svc.flushRecords() }),
      telnyx: new CallbackDriver({ baseUrl: api.url, mode: 'telnyx-ed25519', keyPair: keys, settled: () => api.svc.flushRecords() }),
    }
    const driver = drivers[first]
    const fakes = { telnyx, twilio }
    const acct = await api.signup()
    const A = api.phone(1), B = api.phone(2)
    const s = (await api.req('POST', '/v1/sessions', { token: acct.token, body: { agentPhone: A, customerPhone: B } })).body

    const health = async () => ((await api.req('GET', '/v1/health/cpaas')).body.providers as Array<{ name: string; state: string }>)
      .map(p => `${p.name}:${p.state}`).sort()
    t.same(await health(), ['telnyx:CLOSED', 'twilio:CLOSED'], 'each provider has its breaker')
    // One deployment takes both providers' callbacks at once, each answered in its own dialect.
    for (const [name, d] of Object.entries(drivers)) {
      const xml = await (await d.voice({ from: B, to: s.proxyNumber, callSid: `CA-${first}-${name}` })).text()
      t.match(xml, new RegExp(` action="[^"]+${d.basePath}/voice/dial-status\\?callId=`), `a call on ${name}'s webhooks is answered with ${name}'s callbacks`)
    }

    let n = 0
    const relay = async () => {
      const i = ++n
      const r = await driver.smsReceived({ from: B, to: s.proxyNumber, text: `message ${i}`, messageId: `pf-${first}-${i}` })
      t.equal(r.status, 200)
      return eventually(async () => {
        const rows = (await api.req('GET', `/v1/sessions/${s.id}/sms`, { token: acct.token })).body.data as Array<{ status: string }>
        return rows.length === i && rows.every(row => row.status === 'SENT') ? true : undefined
      }, `forward ${i} recorded SENT`)
    }

    await relay()
    t.equal(fakes[first].count, 1, `a healthy ${first} takes the message`)
    t.equal(fakes[second].count, 0)

    fakes[first].setBehaviour({ status: 500 })
    await relay()
    t.equal(fakes[first].count, 2, `${first} was asked once`)
    t.equal(fakes[second].count, 1, `the message went out through ${second}`)
    const statusPath = second === 'twilio' ? '/v1/webhooks/twilio/sms' : '/v1/webhooks/cpaas/sms'
    t.match(fakes[second].sent[0], { from: s.proxyNumber, to: A, text: 'message 2', webhook: new RegExp(`${statusPath}$`) }, `from the same proxy, with ${second}'s status callback`)
    t.same(await health(), ['telnyx:CLOSED', 'twilio:CLOSED'], 'one failure does not open a breaker')

    // An ambiguous failure (no answer in time) is not resent through the other provider.
    fakes[first].setBehaviour({ hang: true })
    const i = ++n
    await driver.smsReceived({ from: B, to: s.proxyNumber, text: `message ${i}`, messageId: `pf-${first}-${i}` })
    await eventually(async () => {
      const rows = (await api.req('GET', `/v1/sessions/${s.id}/sms`, { token: acct.token })).body.data as Array<{ status: string }>
      return rows.length === i && rows.some(row => row.status === 'FAILED') ? true : undefined
    }, 'the timed-out forward recorded FAILED', 8_000)
    t.equal(fakes[second].count, 1, `a timeout on ${first} is not resent through ${second} (it may have been sent)`)
  })
}
