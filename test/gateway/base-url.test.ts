// With PORT=0 and no PUBLIC_BASE_URL the base URL is the listener's, with the port it
// was bound to (never `:0`): problem `type` URIs, OpenAPI `servers`, TeXML callback URLs and the
// stream's refusals. With PUBLIC_BASE_URL, that and nothing else.
import t from 'tap'
import { startTestService } from '../support/service.js'
import { connectWs, type HandshakeRefused } from '../support/ws-client.js'

t.test('PORT=0 without PUBLIC_BASE_URL: every URL the service writes carries the bound port', async t => {
  const s = await startTestService(t)
  t.not(s.svc.port, 0)
  const base = `http://127.0.0.1:${s.svc.port}`
  t.equal(s.url, base)

  const missing = await s.req('GET', '/v1/no-such-thing')
  t.equal(missing.status, 404)
  t.equal(missing.body.type, `${base}/errors/not-found`, 'problem type')
  const wrongMethod = await s.req('DELETE', '/v1/health')
  t.equal(wrongMethod.body.type, `${base}/errors/method-not-allowed`, 'the gateway fallback too')

  const doc = await s.req('GET', '/v1/openapi.json')
  t.equal(doc.body.servers[0].url, base, 'OpenAPI servers')

  const acct = await s.signup()
  const agent = s.phone(1), customer = s.phone(2)
  const created = await s.req('POST', '/v1/sessions', { token: acct.token, body: { agentPhone: agent, customerPhone: customer } })
  t.equal(created.status, 201)
  const voice = await s.driver.voice({ from: customer, to: created.body.proxyNumber, callSid: `v3:base-url-${process.pid}` })
  const xml = await voice.text()
  const action = xml.match(/ action="([^"]+)"/)?.[1]
  t.match(action, new RegExp(`^${base.replace(/[.]/g, '\\.')}/v1/webhooks/cpaas/voice/dial-status\\?callId=`), 'TeXML Dial action')
  t.notMatch(xml, /:0\//, 'no URL with port 0')

  const refused = await connectWs(`${base}/v1/stream`).then(() => null, (e: HandshakeRefused) => e)
  t.equal(refused?.status, 401)
  t.equal(JSON.parse(refused!.body).type, `${base}/errors/unauthorized`, 'stream handshake refusal')
})

t.test('PUBLIC_BASE_URL set: it is the base URL, whatever port is bound', async t => {
  const s = await startTestService(t, { env: { PUBLIC_BASE_URL: 'https://mask.example.com/' } })
  const missing = await s.req('GET', '/v1/no-such-thing')
  t.equal(missing.body.type, 'https://mask.example.com/errors/not-found')
  const doc = await s.req('GET', '/v1/openapi.json')
  t.equal(doc.body.servers[0].url, 'https://mask.example.com')
})
