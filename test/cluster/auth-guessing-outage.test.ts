// A password-guessing loop against one account stays bounded while Redis is away
// (api/auth/credential-limiter.ts, api/auth/account-throttle.ts). Redis is SIGKILLed on two nodes,
// then one guessing loop per node, a new address per guess (so only the account throttle can stop
// it): each node checks at most the account limit (10) of wrong passwords, counted in its own
// memory, then refuses the account (429); after Redis returns, both nodes still refuse it, even
// with the right password. Embedded mode is single-node by design: skipped there.
import t from 'tap'
import { ACCOUNT_LIMIT, embeddedSkip, twoAuthNodes } from './auth-lib.js'

t.test('a Redis outage: password guessing against one account stays bounded per node', { skip: embeddedSkip }, async t => {
  const { redis, post } = await twoAuthNodes(t)
  const victim = { email: 'victim@outage.example', password: 'a password nobody guesses' }
  t.equal((await post(1, '/v1/auth/signup', { companyName: 'Outage Victim', ...victim })).status, 201, 'the account')

  await redis.kill()
  const t0 = Date.now()
  const statuses: number[][] = [[], []]
  t.teardown(() => t.comment(`guesses so far: ${statuses.map((s, i) => `node ${i + 1}: ${s.join(',')}`).join('; ')}`))
  await Promise.all([0, 1].map(async node => {
    const out = statuses[node]!
    // Each guess is a password hash (a few hundred ms; seconds on a loaded machine): past twice
    // the limit without a refusal, the bound is broken anyway.
    for (let n = 0; n < 2 * ACCOUNT_LIMIT + 2 && out.at(-1) !== 429; n++) {
      out.push((await post(node, '/v1/auth/dashboard/login', { email: victim.email, password: `guess-${node}-${n}` })).status)
    }
  }))
  t.comment(`guessing took ${Date.now() - t0} ms: ${statuses.map((s, i) => `node ${i + 1}: ${s.join(',')}`).join('; ')}`)
  for (const [i, s] of statuses.entries()) {
    t.same(s, [...Array(ACCOUNT_LIMIT).fill(401), 429], `node ${i + 1}: ${ACCOUNT_LIMIT} wrong passwords checked, then the account is refused`)
  }

  await redis.start()
  await new Promise(r => setTimeout(r, 2_000)) // the nodes reconnect within about a second
  const after = await Promise.all([0, 1].map(node => post(node, '/v1/auth/dashboard/login', victim)))
  t.same(after.map(r => r.status), [429, 429], 'after Redis returns, both nodes still refuse the account, even the right password')
})
