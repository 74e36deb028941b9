// contract D5 failover breaker: CLOSED → OPEN after 5 consecutive failures or timeouts (3 s);
// OPEN → HALF_OPEN after 30 s; one trial request closes or reopens it. Driven by a fake clock.
import t from 'tap'
import { CircuitBreaker, type BreakerState } from '../../api/cpaas/circuit-breaker.js'
import { httpProviderError, ProviderError } from '../../api/cpaas/provider.js'

const T0 = Date.UTC(2026, 10, 22, 10, 0, 0)
function setup(timeoutMs = 0) {
  let now = T0
  const transitions: string[] = []
  const b = new CircuitBreaker({
    name: 'telnyx', now: () => now, timeoutMs,
    onTransition: tr => transitions.push(`${tr.from}->${tr.to}`),
  })
  return { b, transitions, advance: (ms: number) => { now += ms }, at: () => now }
}
const boom = () => Promise.reject(httpProviderError(503))
const ok = () => Promise.resolve('ok')

t.test('5 consecutive failures open it; nothing is attempted while OPEN', async t => {
  const { b, transitions } = setup()
  for (let i = 1; i <= 4; i++) {
    await t.rejects(b.execute(boom), { code: 'provider-http-503' })
    t.equal(b.state, 'CLOSED', `still CLOSED after ${i}`)
  }
  await t.rejects(b.execute(boom), { code: 'provider-http-503' })
  t.equal(b.state, 'OPEN')
  t.same(b.snapshot(), { name: 'telnyx', state: 'OPEN', openedAt: new Date(T0).toISOString(), lastError: 'provider-http-503' })
  let called = false
  await t.rejects(b.execute(async () => { called = true }), { code: 'provider-circuit-open', ambiguous: false })
  t.notOk(called)
  t.notOk(b.canRequest())
  t.same(transitions, ['CLOSED->OPEN'])
})

t.test('a success resets the consecutive count', async t => {
  const { b } = setup()
  for (let i = 0; i < 4; i++) await b.execute(boom).catch(() => {})
  await b.execute(ok)
  t.equal(b.consecutiveFailures, 0)
  for (let i = 0; i < 4; i++) await b.execute(boom).catch(() => {})
  t.equal(b.state, 'CLOSED')
  t.equal(b.snapshot().lastError, 'provider-http-503', 'lastError kept while CLOSED')
  t.equal(b.snapshot().openedAt, null)
})

t.test('request refusals (4xx) do not count; they prove the provider is up', async t => {
  const { b } = setup()
  for (let i = 0; i < 10; i++) await t.rejects(b.execute(() => Promise.reject(httpProviderError(422))), { code: 'provider-http-422' })
  t.equal(b.state, 'CLOSED')
  t.equal(b.snapshot().lastError, null)
})

t.test('OPEN → HALF_OPEN after 30 s; a successful trial closes it', async t => {
  const { b, advance, transitions } = setup()
  for (let i = 0; i < 5; i++) await b.execute(boom).catch(() => {})
  advance(29_999)
  t.equal(b.state, 'OPEN')
  advance(1)
  t.equal(b.state, 'HALF_OPEN')
  t.same(b.snapshot(), { name: 'telnyx', state: 'HALF_OPEN', openedAt: new Date(T0).toISOString(), lastError: 'provider-http-503' })
  t.equal(await b.execute(ok), 'ok')
  t.same(b.snapshot(), { name: 'telnyx', state: 'CLOSED', openedAt: null, lastError: 'provider-http-503' })
  t.same(transitions, ['CLOSED->OPEN', 'OPEN->HALF_OPEN', 'HALF_OPEN->CLOSED'])
})

t.test('HALF_OPEN admits one trial; a failed trial reopens it for another 30 s', async t => {
  const { b, advance, at } = setup()
  for (let i = 0; i < 5; i++) await b.execute(boom).catch(() => {})
  advance(30_000)
  let release!: (v: string) => void
  const trial = b.execute(() => new Promise<string>((_, reject) => { release = () => reject(httpProviderError(500)) }))
  t.equal(b.state, 'HALF_OPEN')
  t.notOk(b.canRequest(), 'trial in flight')
  await t.rejects(b.execute(ok), { code: 'provider-circuit-open' }, 'a second request is refused during the trial')
  release('')
  await t.rejects(trial, { code: 'provider-http-500' })
  const reopenedAt = at()
  t.same(b.snapshot(), { name: 'telnyx', state: 'OPEN', openedAt: new Date(reopenedAt).toISOString(), lastError: 'provider-http-500' })
  advance(29_000)
  t.equal(b.state, 'OPEN')
  advance(1_000)
  t.equal(b.state, 'HALF_OPEN')
})

t.test('a call slower than the timeout fails with provider-timeout and counts', async t => {
  const { b } = setup(20)
  const states: BreakerState[] = []
  for (let i = 0; i < 5; i++) {
    await t.rejects(b.execute(() => new Promise(() => {})), { code: 'provider-timeout', ambiguous: true })
    states.push(b.state)
  }
  t.same(states, ['CLOSED', 'CLOSED', 'CLOSED', 'CLOSED', 'OPEN'])
})

t.test('non-provider errors are normalized to an ambiguous provider-error', async t => {
  const { b } = setup()
  const err = await b.execute(() => Promise.reject(new Error('+12025550142 said hello'))).catch((e: unknown) => e)
  t.ok(err instanceof ProviderError)
  t.equal((err as ProviderError).message, 'provider-error')
  t.equal((err as ProviderError).ambiguous, true)
})
