// Logins before signups (api/auth/hash-queue.ts): a password check of an existing account never
// waits behind signups, not even behind one already hashing, and a signup never waits longer than the signup wait bound: past it, 503
// with Retry-After, at once or when the bound is reached, never held open. The scheduler is driven
// with hashes the test finishes itself; the last test goes through the API with real scrypt.
import t, { type Test } from 'tap'
import { inHashSlot, passwordQueueDepth, setSignupMaxWait, SCRYPT_CONCURRENCY, DEFAULT_SIGNUP_MAX_WAIT_MS, type HashLane } from '../../api/auth/hash-queue.js'
import { ApiProblem } from '../../api/route.js'
import { BASE_URL, startApi } from '../gateway/harness.js'

/** A hash that runs until the test ends it (at once if ended before its turn); `started` records the order slots were given in. */
function held(lane: HashLane, name: string, started: string[]) {
  let finish: (() => void) | null = null
  let ended = false
  const done = inHashSlot(lane, () => { started.push(name); return new Promise<void>(r => { if (ended) r(); else finish = r }) })
  return { done, end: () => { ended = true; finish?.() } }
}

const tick = () => new Promise(r => setImmediate(r))

/** Every slot of `lane` taken by a hash the test ends, with signups allowed to wait a minute. */
async function slotsTaken(t: Test, lane: HashLane, started: string[]) {
  setSignupMaxWait(60_000)
  t.teardown(() => setSignupMaxWait(DEFAULT_SIGNUP_MAX_WAIT_MS))
  const running = Array.from({ length: SCRYPT_CONCURRENCY }, (_, i) => held(lane, `running-${i}`, started))
  await tick()
  return running
}

t.test('a login starts at once even while signups hold every slot; the signups queued wait for a signup\'s slot', async t => {
  const started: string[] = []
  const running = await slotsTaken(t, 'signup', started)
  const s1 = held('signup', 'signup-1', started)
  const s2 = held('signup', 'signup-2', started)
  await tick()
  const login = held('check', 'login', started)
  await tick()
  t.same(started, [...running.map((_, i) => `running-${i}`), 'login'], 'the login hashes now, beside the signups (one hash, not two)')
  t.equal(passwordQueueDepth(), SCRYPT_CONCURRENCY + 3, 'signups in every slot, the login on top, two signups waiting')
  login.end()
  await login.done
  await tick()
  t.equal(started.length, SCRYPT_CONCURRENCY + 1, 'the login\'s slot is not one a signup may take')

  running[0]!.end()
  for (let i = 0; i < 5 && started.length === SCRYPT_CONCURRENCY + 1; i++) await tick()
  t.equal(started.at(-1), 'signup-1', 'a signup\'s freed slot goes to the next signup')
  for (const h of [...running, s1, s2]) h.end()
  await Promise.all([...running.map(r => r.done), s1.done, s2.done])
  t.same(started.slice(SCRYPT_CONCURRENCY + 1), ['signup-1', 'signup-2'], 'the signups, in their order')
  t.equal(passwordQueueDepth(), 0, 'drained')
})

t.test('with every check slot busy, a waiting login goes before signups queued earlier', async t => {
  const started: string[] = []
  const running = await slotsTaken(t, 'check', started)
  const s1 = held('signup', 'signup-1', started)
  await tick()
  const login = held('check', 'login', started)
  await tick()
  t.same(started, running.map((_, i) => `running-${i}`), 'nobody else started')
  running[0]!.end()
  for (let i = 0; i < 5 && started.length === SCRYPT_CONCURRENCY; i++) await tick()
  t.equal(started[SCRYPT_CONCURRENCY], 'login', 'the freed slot goes to the login, not to the signup queued before it')
  for (const h of [...running, login, s1]) h.end()
  await Promise.all([...running.map(r => r.done), s1.done, login.done])
  t.same(started.slice(SCRYPT_CONCURRENCY), ['login', 'signup-1'])
  t.equal(passwordQueueDepth(), 0, 'drained')
})

t.test('a signup that would wait past the bound is refused at once; one overtaken by logins at the bound', async t => {
  const BOUND = 1_500
  setSignupMaxWait(BOUND)
  t.teardown(() => setSignupMaxWait(DEFAULT_SIGNUP_MAX_WAIT_MS))
  const started: string[] = []
  const running = Array.from({ length: SCRYPT_CONCURRENCY }, (_, i) => held('check', `running-${i}`, started))
  await tick()

  // Queued: the estimate (the hashes running, ~one hash each) is under the bound.
  const t0 = performance.now()
  const queued = held('signup', 'queued', started)
  const queuedOutcome = queued.done.then(() => 'hashed', (err: unknown) => err)
  // Logins keep arriving and go first; as the queue grows, new signups are refused at once.
  const logins = Array.from({ length: 15 }, (_, i) => held('check', `login-${i}`, started))
  let refusedAtOnce: unknown = null
  const t1 = performance.now()
  await inHashSlot('signup', async () => { started.push('late') }).catch((err: unknown) => { refusedAtOnce = err })
  t.ok(performance.now() - t1 < 50, 'the late signup was answered at once')
  t.type(refusedAtOnce, ApiProblem, 'refused')
  t.match(refusedAtOnce, { slug: 'unavailable', headers: { 'retry-after': /^[1-9][0-9]*$/ } }, '503 with Retry-After')

  const outcome = await queuedOutcome
  const waited = performance.now() - t0
  t.type(outcome, ApiProblem, 'the queued signup, still waiting at the bound, is refused')
  t.match(outcome, { slug: 'unavailable', headers: { 'retry-after': /^[1-9][0-9]*$/ } }, '503 with Retry-After')
  t.ok(waited >= BOUND - 20 && waited < BOUND + 1_000, `refused at the bound (${waited.toFixed(0)} ms), not when a slot freed`)
  t.notOk(started.includes('queued') || started.includes('late'), 'neither signup hashed')

  for (const h of [...running, ...logins]) h.end()
  await Promise.all([...running, ...logins].map(x => x.done))
  t.equal(passwordQueueDepth(), 0, 'drained, no slot lost')
})

t.test('through the API: a signup flood from many addresses is refused with Retry-After, a login is answered', { timeout: 300_000 }, async t => {
  const config = { publicBaseUrl: BASE_URL, nodeId: 'test', cooldownSeconds: 900, retentionDays: 90, webhookAllowInsecure: false, trustedProxies: ['127.0.0.1'] }
  const api = await startApi(t, { services: { config } })
  const a = await api.signup()
  const flood = Array.from({ length: 40 }, (_, i) => api.post('/v1/auth/signup', {
    body: { companyName: `Flood ${i}`, email: `flood-${i}@example.com`, password: 'correct horse battery' }, headers: { 'x-forwarded-for': `198.51.100.${i + 1}` },
  }))
  await new Promise(r => setTimeout(r, 50))
  const login = await api.post('/v1/auth/dashboard/login', { body: { email: a.email, password: a.password }, headers: { 'x-forwarded-for': '203.0.113.1' } })
  const answers = await Promise.all(flood)
  t.equal(login.status, 200, 'the login is answered during the flood')
  const refused = answers.filter(r => r.status === 503)
  t.comment(`flood: ${answers.filter(r => r.status === 201).length} created, ${refused.length} refused`)
  t.same(answers.filter(r => r.status !== 201 && r.status !== 503).map(r => r.status), [], 'every signup: 201 or 503')
  t.ok(refused.length >= 40 - 20, 'most of the flood is refused (the wait bound holds a few seconds of hashes at most)')
  for (const r of refused) t.ok(Number(r.headers.get('retry-after')) >= 1, 'with Retry-After')
  t.equal(passwordQueueDepth(), 0, 'drained')
})
