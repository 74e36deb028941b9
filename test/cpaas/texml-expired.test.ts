// Contract 3.1 / contract D5: expired or unknown caller on a known proxy gets the tenant's
// expiredCallBehavior; direction not allowed and unknown proxy are rejected.
import t from 'tap'
import {
  decisionTexml, EMPTY_RESPONSE, ENDED_MESSAGE, expiredTexml, hangupTexml, OUT_OF_SERVICE_MESSAGE, rejectTexml,
} from '../../api/cpaas/telnyx/texml.js'

const H = '<?xml version="1.0" encoding="UTF-8"?>'
const PROXY = '+12025550100'
const SUPPORT = '+12025550123'
const DEAD = `${H}<Response><Say>${OUT_OF_SERVICE_MESSAGE}</Say><Hangup/></Response>`

t.test('DEAD_LINE: out-of-service Say, then Hangup', async t => {
  t.equal(expiredTexml({ expiredCallBehavior: 'DEAD_LINE', supportPhone: SUPPORT }, PROXY), DEAD)
})

t.test('REDIRECT_SUPPORT: Dial the support number with the proxy as caller id', async t => {
  t.equal(
    expiredTexml({ expiredCallBehavior: 'REDIRECT_SUPPORT', supportPhone: SUPPORT }, PROXY),
    `${H}<Response><Dial callerId="${PROXY}"><Number>${SUPPORT}</Number></Dial></Response>`,
  )
})

t.test('REDIRECT_SUPPORT without a support number falls back to DEAD_LINE', async t => {
  t.equal(expiredTexml({ expiredCallBehavior: 'REDIRECT_SUPPORT', supportPhone: null }, PROXY), DEAD)
  t.equal(expiredTexml({ expiredCallBehavior: 'REDIRECT_SUPPORT', supportPhone: '' }, PROXY), DEAD)
})

t.test('PLAY_MESSAGE: Say the message, then Hangup', async t => {
  t.equal(
    expiredTexml({ expiredCallBehavior: 'PLAY_MESSAGE', supportPhone: null }, PROXY),
    `${H}<Response><Say>${ENDED_MESSAGE}</Say><Hangup/></Response>`,
  )
})

t.test('no tenant: DEAD_LINE', async t => {
  t.equal(expiredTexml(null, PROXY), DEAD)
})

t.test('reject, hangup and the empty response', async t => {
  t.equal(rejectTexml('rejected'), `${H}<Response><Reject reason="rejected"/></Response>`)
  t.equal(rejectTexml(), `${H}<Response><Reject/></Response>`)
  t.equal(hangupTexml(), `${H}<Response><Hangup/></Response>`)
  t.equal(EMPTY_RESPONSE, '<?xml version="1.0" encoding="UTF-8"?><Response/>')
})

t.test('decisionTexml maps every non-connect decision kind', async t => {
  const opts = { baseUrl: 'https://x.example' }
  t.equal(decisionTexml({ kind: 'direction-not-allowed' }, opts), rejectTexml('rejected'))
  t.equal(decisionTexml({ kind: 'unknown-proxy' }, opts), rejectTexml())
  t.equal(decisionTexml({ kind: 'no-session', proxy: PROXY, tenant: null }, opts), DEAD)
  t.equal(
    decisionTexml({ kind: 'no-session', proxy: PROXY, tenant: { expiredCallBehavior: 'REDIRECT_SUPPORT', supportPhone: SUPPORT } }, opts),
    expiredTexml({ expiredCallBehavior: 'REDIRECT_SUPPORT', supportPhone: SUPPORT }, PROXY),
  )
  // The engine's decision may carry more fields than the local structural type names.
  const richer = { kind: 'direction-not-allowed' as const, sessionId: 's', tenantId: 't', direction: 'B_TO_A' as const }
  t.equal(decisionTexml(richer, opts), rejectTexml('rejected'))
})
