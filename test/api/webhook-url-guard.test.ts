// PATCH /v1/config stored webhookUrl values that POST /v1/webhooks refuses (loopback,
// private, metadata and credential-bearing URLs). Both now run one check and refuse at write time
// with the same issue code.
import t from 'tap'
import { webhookRoutes } from '../../api/routes/webhooks.js'
import { startApi } from '../gateway/harness.js'

const REFUSED: [string, string][] = [
  ['http://hooks.example.com/x', 'https_required'],
  ['https://127.0.0.1/x', 'non_public_address'],
  ['https://127.1/x', 'non_public_address'],
  ['https://2130706433/x', 'non_public_address'],
  ['https://0x7f000001/x', 'non_public_address'],
  ['https://[::1]/x', 'non_public_address'],
  ['https://[::ffff:127.0.0.1]/x', 'non_public_address'],
  ['https://0.0.0.0/x', 'non_public_address'],
  ['https://10.0.0.8/x', 'non_public_address'],
  ['https://172.16.5.4/x', 'non_public_address'],
  ['https://192.168.1.1/x', 'non_public_address'],
  ['https://100.64.0.1/x', 'non_public_address'],
  ['https://169.254.169.254/latest/meta-data', 'non_public_address'],
  ['https://[fd00:ec2::254]/x', 'non_public_address'],
  ['https://[fe80::1]/x', 'non_public_address'],
  ['https://localhost/x', 'non_public_address'],
  ['https://localhost:8443/x', 'non_public_address'],
  ['https://user:pw@hooks.example.com/x', 'credentials_not_allowed'],
  ['https://token@hooks.example.com/x', 'credentials_not_allowed'],
]

t.test('PATCH /v1/config refuses every webhookUrl that POST /v1/webhooks refuses', async t => {
  const api = await startApi(t, { extraRoutes: webhookRoutes })
  const a = await api.signup()
  const owner = await api.login(a.email, a.password)
  for (const [url, issue] of REFUSED) {
    const hook = await api.post('/v1/webhooks', { token: a.accessToken, body: { url, events: ['session.created'] } })
    t.equal(hook.status, 400, `POST /v1/webhooks ${url}`)
    t.same(hook.body.errors, [{ field: 'url', issue }])
    const cfg = await api.patch('/v1/config', { token: owner, body: { webhookUrl: url } })
    t.equal(cfg.status, 400, `PATCH /v1/config ${url}`)
    t.match(cfg.headers.get('content-type'), /^application\/problem\+json/)
    t.match(cfg.body, { type: /\/errors\/validation-error$/, errors: [{ field: 'webhookUrl', issue }] })
  }
  const stored = await api.get('/v1/config', { token: owner })
  t.equal(stored.body.webhookUrl, null, 'nothing was stored')

  // A public address passes both.
  const ok = 'https://93.184.215.14/hooks'
  t.equal((await api.post('/v1/webhooks', { token: a.accessToken, body: { url: ok, events: ['session.created'] } })).status, 201)
  const cfg = await api.patch('/v1/config', { token: owner, body: { webhookUrl: ok } })
  t.equal(cfg.status, 200)
  t.equal(cfg.body.webhookUrl, ok)
  t.equal((await api.patch('/v1/config', { token: owner, body: { webhookUrl: null } })).status, 200, 'clearing it is fine')
})
