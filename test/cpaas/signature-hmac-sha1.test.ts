// contract D5: hmac-sha1 — X-Twilio-Signature = base64 HMAC-SHA1 over PUBLIC_BASE_URL + path +
// query + sorted form name/value pairs. Known vectors are Twilio's documented examples (auth token
// 12345, https://mycompany.com/myapp.php?foo=1&bar=2).
import t from 'tap'
import { createHash } from 'node:crypto'
import { encodeForm } from '../../api/cpaas/form.js'
import { createSignatureVerifier, hmacSha1Signature, signedUrl } from '../../api/cpaas/signature.js'

const twilioParams = (n: string) => ({ CallSid: 'CA1234567890ABCDE', Caller: n, Digits: '1234', From: n, To: '+18005551212' })
const verifier = createSignatureVerifier({ mode: 'hmac-sha1', hmacSecret: '12345', publicBaseUrl: 'https://mycompany.com' })
const req = (sig: string | undefined, body: string, extra: Record<string, string> = {}) => ({
  headers: { 'content-type': 'application/x-www-form-urlencoded', ...(sig === undefined ? {} : { 'x-twilio-signature': sig }), ...extra },
  rawBody: Buffer.from(body),
  path: '/myapp.php',
  query: 'foo=1&bar=2',
})

t.test("Twilio's documented vectors", async t => {
  const url = 'https://mycompany.com/myapp.php?foo=1&bar=2'
  t.equal(hmacSha1Signature('12345', url, twilioParams('+14158675309')), 'RSOYDt4T1cUTdK1PDd93/VVr8B8=')
  t.equal(hmacSha1Signature('12345', url, twilioParams('+14158675310')), 'GvWf1cFY/Q7PnoempGyD5oXAezc=')
  t.equal(signedUrl('https://mycompany.com/', '/myapp.php', 'foo=1&bar=2'), url)
  t.equal(signedUrl('https://mycompany.com', '/myapp.php', ''), 'https://mycompany.com/myapp.php')
})

t.test('verify accepts the documented vector from the raw body (field order irrelevant)', async t => {
  const body = encodeForm({ To: '+18005551212', From: '+14158675309', Digits: '1234', Caller: '+14158675309', CallSid: 'CA1234567890ABCDE' })
  t.same(verifier.verify(req('RSOYDt4T1cUTdK1PDd93/VVr8B8=', body)), { ok: true })
  t.same(verifier.verify({ ...req('RSOYDt4T1cUTdK1PDd93/VVr8B8=', 'ignored'), form: twilioParams('+14158675309') }), { ok: true }, 'from a parsed form')
})

t.test('rejections', async t => {
  const body = encodeForm(twilioParams('+14158675309'))
  t.same(verifier.verify(req(undefined, body)), { ok: false, reason: 'missing-signature' })
  t.same(verifier.verify(req('', body)), { ok: false, reason: 'missing-signature' })
  t.same(verifier.verify(req('GvWf1cFY/Q7PnoempGyD5oXAezc=', body)), { ok: false, reason: 'bad-signature' }, 'other body')
  t.same(verifier.verify(req('RSOYDt4T1cUTdK1PDd93/VVr', body)), { ok: false, reason: 'bad-signature' }, 'truncated')
  t.same(verifier.verify(req('RSOYDt4T1cUTdK1PDd93/VVr8B8', body)), { ok: true }, 'missing padding: same 20 bytes, accepted')
  t.same(verifier.verify(req('AAAA', body)), { ok: false, reason: 'bad-signature' }, 'wrong length')
  t.same(verifier.verify(req('RSOYDt4T1cUTdK1PDd93/VVr8B8=', body + '&Extra=1')), { ok: false, reason: 'bad-signature' }, 'added field')
  t.same(verifier.verify({ ...req('RSOYDt4T1cUTdK1PDd93/VVr8B8=', body), query: 'foo=1&bar=3' }), { ok: false, reason: 'bad-signature' }, 'query is signed')
  t.same(verifier.verify({ ...req('RSOYDt4T1cUTdK1PDd93/VVr8B8=', body), path: '/other' }), { ok: false, reason: 'bad-signature' }, 'path is signed')
  t.same(verifier.verify(req('RSOYDt4T1cUTdK1PDd93/VVr8B8=', 'a=%zz')), { ok: false, reason: 'bad-body' }, 'malformed form')
})

t.test('JSON bodies: bodySHA256 in the signed query must match the raw body', async t => {
  const v = createSignatureVerifier({ mode: 'hmac-sha1', hmacSecret: 's3cret', publicBaseUrl: 'https://m.example' })
  const body = '{"data":{"event_type":"message.received"}}'
  const hash = createHash('sha256').update(body).digest('hex')
  const path = '/v1/webhooks/cpaas/sms'
  const sign = (q: string) => hmacSha1Signature('s3cret', signedUrl('https://m.example', path, q), [])
  const json = (sig: string, q: string, b = body) => ({ headers: { 'content-type': 'application/json', 'x-twilio-signature': sig }, rawBody: Buffer.from(b), path, query: q })
  t.same(v.verify(json(sign(`bodySHA256=${hash}`), `bodySHA256=${hash}`)), { ok: true })
  t.same(v.verify(json(sign(`bodySHA256=${hash}`), `bodySHA256=${hash}`, body + ' ')), { ok: false, reason: 'bad-body' }, 'tampered body')
  t.same(v.verify(json(sign(''), '')), { ok: false, reason: 'bad-body' }, 'unsigned JSON body refused')
})

t.test('configuration', async t => {
  t.throws(() => createSignatureVerifier({ mode: 'hmac-sha1', publicBaseUrl: 'https://x' }), /needs CPAAS_HMAC_SECRET/)
})
