// The callback driver signs exactly what the verifier checks: round trip through a plain
// node:http server that verifies (both signature modes), parses and answers like the real routes.
import t, { type Test } from 'tap'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { parseForm } from '../../api/cpaas/form.js'
import { parseSmsCallback, type SmsCallback } from '../../api/cpaas/sms-payload.js'
import { EMPTY_RESPONSE, rejectTexml } from '../../api/cpaas/telnyx/texml.js'
import { createSignatureVerifier, type SignatureConfig, type SignatureVerifier } from '../../api/cpaas/signature.js'
import { CallbackDriver, generateTelnyxKeyPair } from '../support/callback-driver.js'

interface Seen { path: string; query: string; form: Record<string, string> | null; sms: SmsCallback | null }

async function service(t: Test, cfg: (base: string) => Omit<SignatureConfig, 'publicBaseUrl'> & { publicBaseUrl?: string }) {
  const seen: Seen[] = []
  const ref: { verifier?: SignatureVerifier } = {}
  const server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const raw = Buffer.concat(chunks)
      const [path = '', query = ''] = (req.url ?? '').split('?', 2)
      const headers: Record<string, string> = {}
      for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string') headers[k] = v
      const v = ref.verifier!.verify({ headers, rawBody: raw, path, query })
      const isVoice = path === '/v1/webhooks/cpaas/voice'
      if (!v.ok) {
        res.writeHead(403, { 'content-type': isVoice ? 'application/xml' : 'application/json', 'x-reason': v.reason })
        return res.end(isVoice ? EMPTY_RESPONSE : '')
      }
      const sms = path.endsWith('/sms') ? parseSmsCallback(headers['content-type'], raw) : null
      seen.push({ path, query, form: sms ? null : { ...parseForm(raw) }, sms })
      if (isVoice) { res.writeHead(200, { 'content-type': 'application/xml' }); return res.end(rejectTexml()) }
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end('{"ok":true}')
    })
  })
  await new Promise<void>(r => server.listen(0, '127.0.0.1', r))
  t.teardown(() => new Promise<void>(r => { server.closeAllConnections(); server.close(() => r()) }))
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const c = cfg(base)
  ref.verifier = createSignatureVerifier({ publicBaseUrl: base, ...c })
  return { base, seen }
}

t.test('telnyx-ed25519: every helper is accepted and carries the documented fields', async t => {
  const keys = generateTelnyxKeyPair()
  const { base, seen } = await service(t, () => ({ mode: 'telnyx-ed25519', telnyxPublicKey: keys.publicKeyBase64 }))
  const d = new CallbackDriver({ baseUrl: base, keyPair: keys })
  t.equal(d.publicKeyBase64, keys.publicKeyBase64)

  const voice = await d.voice({ from: '+12025550142', to: '+12025550100', callSid: 'v3:call-1' })
  t.equal(voice.status, 200)
  t.equal(voice.headers.get('content-type'), 'application/xml')
  t.equal(await voice.text(), rejectTexml())
  t.match(seen.at(-1), { path: '/v1/webhooks/cpaas/voice', query: '', form: { CallSid: 'v3:call-1', From: '+12025550142', To: '+12025550100', CallStatus: 'ringing', Direction: 'inbound' } })

  t.equal((await d.status({ callId: 'c 1', callSid: 'v3:leg', callStatus: 'completed', callDuration: 61, parentCallSid: 'v3:call-1' })).status, 200)
  t.same(seen.at(-1), { path: '/v1/webhooks/cpaas/voice/status', query: 'callId=c%201', form: { CallSid: 'v3:leg', ParentCallSid: 'v3:call-1', CallStatus: 'completed', CallDuration: '61' }, sms: null })

  t.equal((await d.dialStatus({ callId: 'c1', callSid: 'v3:call-1', dialCallStatus: 'completed', dialCallDuration: 60 })).status, 200)
  t.match(seen.at(-1), { path: '/v1/webhooks/cpaas/voice/dial-status', query: 'callId=c1', form: { DialCallStatus: 'completed', DialCallDuration: '60' } })

  t.equal((await d.recording({ callId: 'c1', callSid: 'v3:call-1', recordingSid: 'r1', recordingUrl: 'https://r.example/1.mp3', recordingDuration: 59 })).status, 200)
  t.match(seen.at(-1), { path: '/v1/webhooks/cpaas/voice/recording', form: { RecordingSid: 'r1', RecordingStatus: 'completed', RecordingDuration: '59' } })

  const sms = await d.smsReceived({ from: '+12025550142', to: '+12025550100', text: 'Zoë & co 📞', messageId: 'm1' })
  t.same(await sms.json(), { ok: true })
  t.same(seen.at(-1)!.sms, { kind: 'inbound', messageId: 'm1', from: '+12025550142', to: '+12025550100', text: 'Zoë & co 📞' })

  await d.smsStatus({ messageId: 'out-1', eventType: 'message.finalized', status: 'delivered' })
  t.same(seen.at(-1)!.sms, { kind: 'status', messageId: 'out-1', status: 'DELIVERED' })

  await d.smsForm({ from: '+12025550142', to: '+12025550100', text: 'a+b=c', messageId: 'SM1' })
  t.same(seen.at(-1)!.sms, { kind: 'inbound', messageId: 'SM1', from: '+12025550142', to: '+12025550100', text: 'a+b=c' })
})

t.test('telnyx-ed25519: tampering, stale timestamps, missing headers and a foreign key get 403', async t => {
  const keys = generateTelnyxKeyPair()
  const { base, seen } = await service(t, () => ({ mode: 'telnyx-ed25519', telnyxPublicKey: keys.publicKeyBase64 }))
  const d = new CallbackDriver({ baseUrl: base, keyPair: keys })
  const p = { from: '+12025550142', to: '+12025550100' }
  const cases: Array<[string, Promise<Response>, string]> = [
    ['tampered', d.voice(p, { tamper: raw => raw.replace('0142', '0199') }), 'bad-signature'],
    ['stale', d.voice(p, { timestampSeconds: Math.floor(Date.now() / 1000) - 600 }), 'stale-timestamp'],
    ['no signature', d.voice(p, { headers: { 'telnyx-signature-ed25519': null } }), 'missing-signature'],
    ['no timestamp', d.voice(p, { headers: { 'telnyx-timestamp': null } }), 'missing-timestamp'],
    ['foreign key', new CallbackDriver({ baseUrl: base }).voice(p), 'bad-signature'],
  ]
  for (const [name, resP, reason] of cases) {
    const res = await resP
    t.equal(res.status, 403, name)
    t.equal(res.headers.get('x-reason'), reason, name)
    t.equal(await res.text(), EMPTY_RESPONSE, `${name}: empty voice response`)
  }
  t.equal(seen.length, 0, 'nothing reached the handler')
})

t.test('hmac-sha1: forms and JSON (bodySHA256) round-trip; a wrong secret is refused', async t => {
  const { base, seen } = await service(t, () => ({ mode: 'hmac-sha1', hmacSecret: 'hmac-secret' }))
  const d = new CallbackDriver({ baseUrl: base, mode: 'hmac-sha1', hmacSecret: 'hmac-secret' })
  t.equal((await d.voice({ from: '+12025550142', to: '+12025550100', callSid: 'CA1' })).status, 200)
  t.equal((await d.status({ callId: 'c1', callSid: 'CA2', callStatus: 'in-progress' })).status, 200)
  t.equal(seen.at(-1)!.query, 'callId=c1')
  const sms = await d.smsReceived({ from: '+12025550142', to: '+12025550100', text: 'hi', messageId: 'm1' })
  t.equal(sms.status, 200)
  t.match(seen.at(-1)!.query, /^bodySHA256=[0-9a-f]{64}$/)
  t.equal(seen.length, 3)
  const wrong = new CallbackDriver({ baseUrl: base, mode: 'hmac-sha1', hmacSecret: 'other' })
  t.equal((await wrong.voice({ from: '+12025550142', to: '+12025550100' })).status, 403)
  t.throws(() => new CallbackDriver({ baseUrl: base, mode: 'hmac-sha1' }), /needs hmacSecret/)
})

t.test('hmac-sha1 behind a proxy: the driver signs against PUBLIC_BASE_URL, not the socket address', async t => {
  const { base } = await service(t, () => ({ mode: 'hmac-sha1', hmacSecret: 's', publicBaseUrl: 'https://mask.example.com' }))
  const ok = new CallbackDriver({ baseUrl: base, mode: 'hmac-sha1', hmacSecret: 's', publicBaseUrl: 'https://mask.example.com/' })
  t.equal((await ok.voice({ from: '+12025550142', to: '+12025550100' })).status, 200)
  const naive = new CallbackDriver({ baseUrl: base, mode: 'hmac-sha1', hmacSecret: 's' })
  t.equal((await naive.voice({ from: '+12025550142', to: '+12025550100' })).status, 403)
})

t.test('mode none sends no signature headers', async t => {
  const { base, seen } = await service(t, () => ({ mode: 'none' }))
  const d = new CallbackDriver({ baseUrl: base + '/', mode: 'none' })
  t.same(d.sign('/x', '', 'a=1', 'application/x-www-form-urlencoded'), { headers: {}, query: '' })
  t.equal((await d.voice({ from: '+12025550142', to: '+12025550100' })).status, 200)
  t.equal(seen.length, 1)
})
