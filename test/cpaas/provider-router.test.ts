// The outbound router (api/cpaas/provider-router.ts) with the real SDKs against a fake Telnyx and a
// fake Twilio: a message goes through its number's provider; only a number declared on both fails
// over to the other; a number the pool does not know takes the default; each provider's breaker
// is shared by every number it serves.
import t, { type Test } from 'tap'
import { ProviderRouter } from '../../api/cpaas/provider-router.js'
import { TelnyxProvider } from '../../api/cpaas/telnyx/provider.js'
import { TwilioProvider } from '../../api/cpaas/twilio/provider.js'
import { FakeTelnyx } from '../support/fake-telnyx.js'
import { FAKE_ACCOUNT_SID, FAKE_AUTH_TOKEN, FakeTwilio } from '../support/fake-twilio.js'
import { failure } from '../support/provider-failure.js'

const KINDS: Record<string, string> = { '+12025550100': 'twilio', '+12025550101': 'telnyx', '+12025550102': 'twilio+telnyx', '+12025550103': 'sandbox' }

async function setup(t: Test) {
  const telnyx = await FakeTelnyx.start({ apiKey: 'KEY_test' })
  const twilio = await FakeTwilio.start()
  t.teardown(() => Promise.all([telnyx.close(), twilio.close()]))
  const router = new ProviderRouter({
    kinds: {
      telnyx: [new TelnyxProvider({ apiKey: 'KEY_test', baseURL: telnyx.baseURL })],
      twilio: [new TwilioProvider({ accountSid: FAKE_ACCOUNT_SID, authToken: FAKE_AUTH_TOKEN, baseUrl: twilio.baseUrl })],
    },
    defaultKind: 'telnyx',
    numberProvider: n => KINDS[n],
  })
  const send = (from: string) => router.sendSms({ from, to: '+14155551001', text: 'hi' })
  return { telnyx, twilio, router, send }
}

t.test("each number's own provider; unknown numbers take the default", async t => {
  const { telnyx, twilio, send, router } = await setup(t)
  t.match(await send('+12025550100'), { providerName: 'twilio', providerMessageId: /^SM/ })
  t.match(await send('+12025550101'), { providerName: 'telnyx' })
  t.match(await send('+12025550102'), { providerName: 'twilio' }, 'both: the first named is preferred')
  t.match(await send('+19995550100'), { providerName: 'telnyx' }, 'a number the pool does not know: the default')
  t.match(await send('+12025550103'), { providerName: 'telnyx' }, 'a number of a provider no longer configured (seeded under another one): the default')
  t.same([twilio.count, telnyx.count], [2, 3])
  t.throws(() => new ProviderRouter({ kinds: { twilio: [] }, defaultKind: 'telnyx', numberProvider: () => undefined }), /no provider for the default kind telnyx/)
  t.same(router.health().map(h => h.name).sort(), ['telnyx', 'twilio'], 'one breaker a provider')
})

t.test('only a number declared on both crosses to the other provider', async t => {
  const { telnyx, twilio, send } = await setup(t)
  twilio.setBehaviour({ status: 503 })
  t.match(await failure(send('+12025550100')), { code: 'provider-http-503' }, 'twilio only: the failure stands (the provider retries the inbound message)')
  t.equal(telnyx.count, 0, 'never sent through a provider the number does not belong to')
  t.match(await send('+12025550102'), { providerName: 'telnyx' }, 'twilio+telnyx: sent once through telnyx')
  t.same([twilio.count, telnyx.count], [2, 1])
  twilio.setBehaviour({ status: 400 })
  t.match(await failure(send('+12025550102')), { code: 'provider-http-400' }, 'a refusal of the message itself is not retried elsewhere')
  t.equal(telnyx.count, 1)
})

t.test("a provider's breaker opens for all its numbers", async t => {
  const { telnyx, twilio, send, router } = await setup(t)
  twilio.setBehaviour({ status: 500 })
  for (let i = 0; i < 5; i++) await send('+12025550102')
  t.same([twilio.count, telnyx.count], [5, 5])
  t.match(router.health().find(h => h.name === 'twilio'), { state: 'OPEN', lastError: 'provider-http-500' })
  t.match(await send('+12025550102'), { providerName: 'telnyx' }, 'OPEN: straight to telnyx')
  t.match(await failure(send('+12025550100')), { code: 'provider-circuit-open', ambiguous: false }, 'a twilio-only number: refused, nothing sent')
  t.equal(twilio.count, 5, 'twilio was not asked while OPEN')
})
