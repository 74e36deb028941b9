// contract D13: a NUL character or invalid UTF-8 in any text that can reach a statement is refused
// before it gets there: 400 problem documents on the REST API, the callback's own 400 answer
// (empty <Response/>, `{"ok":false}`) on provider callbacks. Postgres refuses NUL in text and
// jsonb; those requests used to end in 500.
import t from 'tap'
import { startTestService, type TestService } from '../support/service.js'

const XML_REFUSAL = '<?xml version="1.0" encoding="UTF-8"?><Response/>'
const FORM = { 'content-type': 'application/x-www-form-urlencoded' }
const JSON_CT = { 'content-type': 'application/json' }
/** An invalid UTF-8 sequence (a lone continuation byte and an overlong encoding). */
const BAD_UTF8 = Buffer.from([0x80, 0xc0, 0xaf])

async function post(api: TestService, path: string, body: string | Buffer, headers: Record<string, string>, token?: string) {
  const h: Record<string, string> = { ...headers }
  if (token) h.authorization = `Bearer ${token}`
  const r = await fetch(api.url + path, { method: 'POST', headers: h, body })
  return { status: r.status, type: r.headers.get('content-type'), text: await r.text() }
}

t.test('provider callbacks answer their 400 refusal', async t => {
  const api = await startTestService(t)
  const voice = [
    ['/v1/webhooks/cpaas/voice/status', 'CallSid=%00&CallStatus=completed'],
    ['/v1/webhooks/cpaas/voice/status', 'CallSid=CA%00x&CallStatus=completed'],
    ['/v1/webhooks/cpaas/voice/status', 'CallSid=CA1&CallStatus=completed&CallDuration=%00'],
    ['/v1/webhooks/cpaas/voice', 'CallSid=%00&From=%2B14155551001&To=%2B12025550100'],
    ['/v1/webhooks/cpaas/voice/dial-status?callId=01890a5d-ac96-774b-bcce-b302099a8057', 'CallSid=CA1&DialCallStatus=completed&RecordingUrl=%00'],
    ['/v1/webhooks/cpaas/voice/recording?callId=01890a5d-ac96-774b-bcce-b302099a8057', 'CallSid=CA1&RecordingSid=RE%00&RecordingUrl=x&RecordingDuration=1'],
  ] as const
  for (const [path, body] of voice) {
    const r = await post(api, path, body, FORM)
    t.same(r, { status: 400, type: 'application/xml', text: XML_REFUSAL }, `${path} ${body}`)
  }
  const raw = await post(api, '/v1/webhooks/cpaas/voice/status', Buffer.concat([Buffer.from('CallSid=CA'), BAD_UTF8, Buffer.from('&CallStatus=completed')]), FORM)
  t.same(raw, { status: 400, type: 'application/xml', text: XML_REFUSAL }, 'raw invalid UTF-8 in a form')
  const rawNul = await post(api, '/v1/webhooks/cpaas/voice/status', Buffer.from('CallSid=CA\0x&CallStatus=completed'), FORM)
  t.same(rawNul, { status: 400, type: 'application/xml', text: XML_REFUSAL }, 'a raw NUL byte in a form')

  const smsRefusal = { status: 400, type: 'application/json; charset=utf-8', text: '{"ok":false}' }
  t.same(await post(api, '/v1/webhooks/cpaas/sms', 'MessageSid=SM%00&From=%2B14155551001&To=%2B12025550100&Body=hi', FORM), smsRefusal, 'sms form')
  const telnyx = (id: string) => `{"data":{"event_type":"message.received","payload":{"id":"${id}","from":{"phone_number":"+14155551001"},"to":[{"phone_number":"+12025550100"}],"text":"hi"}}}`
  t.same(await post(api, '/v1/webhooks/cpaas/sms', telnyx('m\\u0000'), JSON_CT), smsRefusal, 'sms JSON with \\u0000')
  t.same(await post(api, '/v1/webhooks/cpaas/sms', telnyx('m\\ud800'), JSON_CT), smsRefusal, 'sms JSON with a lone surrogate')
  t.same(await post(api, '/v1/webhooks/cpaas/sms', Buffer.concat([Buffer.from(telnyx('m').slice(0, -4)), BAD_UTF8, Buffer.from('"}}}')]), JSON_CT), smsRefusal, 'sms JSON, invalid UTF-8')
  t.same(await post(api, '/v1/webhooks/cpaas/sms', JSON.stringify({ data: { event_type: 'message.finalized', payload: { id: 'm\u0000', to: [{ status: 'delivered' }] } } }), JSON_CT), smsRefusal, 'sms status JSON')
})

t.test('REST bodies, queries and path parameters answer 400', async t => {
  const api = await startTestService(t)
  const acct = await api.signup()
  const cases: [string, string, string | Buffer, string | undefined][] = [
    ['POST', '/v1/auth/signup', '{"companyName":"a\\u0000b","email":"nul@example.test","password":"correct horse"}', undefined],
    ['POST', '/v1/auth/signup', '{"companyName":"a\\ud800b","email":"lone@example.test","password":"correct horse"}', undefined],
    ['POST', '/v1/auth/signup', Buffer.concat([Buffer.from('{"companyName":"a'), BAD_UTF8, Buffer.from('","email":"bad@example.test","password":"correct horse"}')]), undefined],
    ['POST', '/v1/auth/dashboard/login', '{"email":"x\\u0000@example.test","password":"correct horse"}', undefined],
    ['POST', '/v1/sessions', `{"agentPhone":"${api.phone(1)}","customerPhone":"${api.phone(2)}","metadata":{"k":"v\\u0000"}}`, acct.token],
    ['POST', '/v1/sessions', `{"agentPhone":"${api.phone(3)}","customerPhone":"${api.phone(4)}","metadata":{"k\\u0000":"v"}}`, acct.token],
    ['PATCH', '/v1/config', '{"name":"x\\u0000"}', acct.ownerToken],
  ]
  for (const [method, path, body, token] of cases) {
    const r = await fetch(api.url + path, { method, headers: { ...JSON_CT, ...(token ? { authorization: `Bearer ${token}` } : {}) }, body })
    const doc = await r.json() as Record<string, unknown>
    t.equal(r.status, 400, `${method} ${path} ${String(body).slice(0, 60)}`)
    t.match(r.headers.get('content-type'), /^application\/problem\+json/)
    t.match(doc, { type: /\/errors\/validation(-error)?$/, status: 400, detail: 'Text must be valid UTF-8 without NUL characters' })
  }
  // Query strings and path parameters.
  for (const path of ['/v1/webhooks/logs?after=%00', '/v1/sessions?status=ACTIVE%00', '/v1/calls?sessionId=%00']) {
    const r = await api.req('GET', path, { token: acct.token })
    t.equal(r.status, 400, path)
    t.match(r.headers.get('content-type'), /^application\/problem\+json/)
  }
  const call = await api.req('GET', '/v1/calls/a%00b', { token: acct.token })
  t.ok(call.status === 400 || call.status === 404, `GET /v1/calls/a%00b answers ${call.status}`)
  t.match(call.headers.get('content-type'), /^application\/problem\+json/)
})
