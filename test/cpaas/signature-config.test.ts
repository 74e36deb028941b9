// contract D1: CPAAS_SIGNATURE=none is refused unless CPAAS_PROVIDER=sandbox.
import t from 'tap'
import { createSignatureVerifier, validateSignatureConfig } from '../../api/cpaas/signature.js'

t.test('none is refused with telnyx, with a message naming the variables', async t => {
  t.throws(() => validateSignatureConfig('telnyx', 'none'), { message: /CPAAS_SIGNATURE=none is refused with CPAAS_PROVIDER=telnyx/ })
})

t.test('everything else is accepted', async t => {
  t.doesNotThrow(() => validateSignatureConfig('sandbox', 'none'))
  t.doesNotThrow(() => validateSignatureConfig('telnyx', 'telnyx-ed25519'))
  t.doesNotThrow(() => validateSignatureConfig('telnyx', 'hmac-sha1'))
  t.doesNotThrow(() => validateSignatureConfig('sandbox', 'telnyx-ed25519'))
})

t.test('mode none accepts any request', async t => {
  const v = createSignatureVerifier({ mode: 'none', publicBaseUrl: 'http://127.0.0.1:8080' })
  t.equal(v.mode, 'none')
  t.same(v.verify({ headers: {}, rawBody: Buffer.alloc(0), path: '/v1/webhooks/cpaas/voice', query: '' }), { ok: true })
})

t.test('an unknown mode is refused', async t => {
  t.throws(() => createSignatureVerifier({ mode: 'rsa' as never, publicBaseUrl: 'x' }), /unknown CPAAS_SIGNATURE/)
})
