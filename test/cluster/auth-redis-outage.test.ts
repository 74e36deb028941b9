// The credential throttles degrade, never lock out (api/auth/credential-limiter.ts). Two nodes on
// one Postgres and a private redis-server take token exchanges, dashboard logins and signups (each
// from its own address) while Redis is SIGKILLed for 10 s and started again (empty):
// - none of them answers anything but its usual 200/201, before, during and after the outage
//   (it used to be 503 for all three while Redis was away);
// - after the restart the limit is cluster-wide again: two nodes count one API key together.
// The password-guessing bound during an outage: test/cluster/auth-guessing-outage.test.ts.
// Embedded mode (PGlite, in-process bus) is single-node by design: skipped there.
import t from 'tap'
import { request } from '../support/child-service.js'
import { redisOutageUnderLoad, sleep } from './lib.js'
import { embeddedSkip, sharedCount, twoAuthNodes } from './auth-lib.js'

/** Each loop's pause: well under every limit (10 token exchanges a minute per key; logins and signups come from new addresses). */
const PACE_MS = 1_000

interface Answer { kind: string; node: number; start: number; end: number; phase: 'before' | 'outage' | 'after'; status: number; text: string }

t.test('a Redis outage locks nobody out: token exchanges, logins and signups answered as usual on two nodes', { skip: embeddedSkip }, async t => {
  const { redis, nodes, post } = await twoAuthNodes(t)
  const owner = { email: 'owner@outage.example', password: 'correct horse battery staple' }
  const su = await post(0, '/v1/auth/signup', { companyName: 'Outage Owner', ...owner })
  t.equal(su.status, 201, 'a tenant')
  const { apiKey, apiSecret } = su.body as { apiKey: string; apiSecret: string }

  const answers: Omit<Answer, 'phase'>[] = []
  let ops = 0
  async function loop(stopped: () => boolean, kind: string, send: (node: number, n: number) => Promise<{ status: number; text: string }>) {
    for (let n = 0; !stopped(); n++) {
      const node = n % 2
      const start = Date.now()
      const r = await send(node, n)
      ops++
      answers.push({ kind, node, start, end: Date.now(), status: r.status, text: r.text.slice(0, 200) })
      await sleep(PACE_MS)
    }
  }
  const run = (stopped: () => boolean) => Promise.all([
    loop(stopped, 'token', node => request(nodes[node]!.url, 'POST', '/v1/auth/token', { body: { apiKey, apiSecret } })),
    loop(stopped, 'login', node => post(node, '/v1/auth/dashboard/login', owner)),
    loop(stopped, 'signup', (node, n) => post(node, '/v1/auth/signup', { companyName: `Outage ${n} ${process.pid}`, email: `signup-${n}-${process.pid}@outage.example`, password: 'correct horse battery' })),
  ])
  // 2 s of load, SIGKILL, 10 s, restart (empty), 2 s more.
  const { outageMs, opsDuring, backAt } = await redisOutageUnderLoad(redis, run, () => ops)
  t.comment(`outage ${outageMs} ms, ${opsDuring} answers meanwhile`)
  const killedAt = backAt - outageMs
  const phased: Answer[] = answers.map(a => ({ ...a, phase: a.end < killedAt ? 'before' : a.start > backAt ? 'after' : 'outage' }))

  const by = (kind: string, p: Answer['phase']) => phased.filter(a => a.kind === kind && a.phase === p)
  for (const p of ['before', 'outage', 'after'] as const) {
    t.comment(`${p}: ${['token', 'login', 'signup'].map(k => `${k} ${by(k, p).map(a => a.status).join(',')}`).join('; ')}`)
  }
  // Sent while Redis was down: their throttle was decided without it (a login or a signup is a
  // password hash, seconds on a loaded machine: it may be answered after the restart).
  t.ok(['token', 'login', 'signup'].every(k => by(k, 'outage').some(a => a.start >= killedAt && a.start < backAt)), 'token exchanges, logins and signups were sent during the outage')
  const want = (a: Answer) => (a.kind === 'signup' ? 201 : 200)
  t.same(phased.filter(a => a.status !== want(a)).map(a => `${a.phase} ${a.kind} node ${a.node + 1}: ${a.status} ${a.text}`), [],
    'every token exchange, login and signup got its usual answer: none 503, before, during or after the outage')

  t.same(await sharedCount(post, nodes), [200, '9', 200, '8'], 'after the restart, one count across both nodes again')
  for (const [i, n] of nodes.entries()) t.notMatch(n.stderr(), /Unhandled|unhandled/, `node ${i + 1}: no unhandled error`)
})
