// contract 8.4: password hashing (scrypt, 128 MiB and a few hundred ms each) is bounded. At most
// SCRYPT_CONCURRENCY run at once and SCRYPT_QUEUE wait; a burst beyond that is answered 503
// `unavailable` with Retry-After at once, without hashing, and the service recovers.
import t from 'tap'
import { passwordQueueDepth, SCRYPT_CONCURRENCY, SCRYPT_QUEUE } from '../../api/auth/passwords.js'
import { BASE_URL, startApi } from '../gateway/harness.js'

t.test('a login burst past the queue gets 503 + Retry-After; the queue never grows past its bound', async t => {
  const config = { publicBaseUrl: BASE_URL, nodeId: 'test', cooldownSeconds: 900, retentionDays: 90, webhookAllowInsecure: false, trustedProxies: ['127.0.0.1'] }
  const api = await startApi(t, { services: { config } })
  const a = await api.signup()
  const burst = SCRYPT_CONCURRENCY + SCRYPT_QUEUE + 8
  let deepest = 0
  const watch = setInterval(() => { deepest = Math.max(deepest, passwordQueueDepth()) }, 5)
  // Each from its own address and for its own (unknown) email: no other throttle interferes.
  const answers = await Promise.all(Array.from({ length: burst }, (_, i) =>
    api.post('/v1/auth/dashboard/login', { body: { email: `nobody-${i}@example.com`, password: 'wrong password' }, headers: { 'x-forwarded-for': `198.51.100.${i + 1}` } })))
  clearInterval(watch)
  const refused = answers.filter(r => r.status === 503)
  t.equal(answers.filter(r => r.status === 401).length + refused.length, burst, 'every answer is a 401 or a 503')
  t.ok(refused.length >= burst - SCRYPT_CONCURRENCY - SCRYPT_QUEUE, `${refused.length} refused`)
  for (const r of refused) {
    t.match(r.headers.get('content-type'), /^application\/problem\+json/)
    t.match(r.body, { type: `${BASE_URL}/errors/unavailable`, status: 503, detail: 'Too many password checks in progress; retry after the Retry-After delay' })
    t.ok(Number(r.headers.get('retry-after')) >= 1, 'Retry-After')
  }
  t.ok(deepest <= SCRYPT_CONCURRENCY + SCRYPT_QUEUE, `at most ${SCRYPT_CONCURRENCY} running + ${SCRYPT_QUEUE} waiting (saw ${deepest})`)
  t.equal(passwordQueueDepth(), 0, 'drained')
  const ok = await api.post('/v1/auth/dashboard/login', { body: { email: a.email, password: a.password }, headers: { 'x-forwarded-for': '203.0.113.1' } })
  t.equal(ok.status, 200, 'the owner logs in once the burst is over')
})
