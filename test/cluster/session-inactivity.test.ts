// contract D10 (inactivityTimeoutMinutes) on two nodes (real service processes, one Postgres, a private Redis): a PATCH
// of inactivityTimeoutMinutes on one node reaches the other's memory; an SMS routed by one node
// keeps the session alive on both (the other learns it from the bus, or from Postgres when its
// deadline comes); once idle, the session ends as POST /end would exactly once (one version
// written), and both nodes show the end. Real time: about two minutes (the timeout's minimum is
// one minute). Embedded mode is single-node by design: skipped there with the reason.
import t from 'tap'
import { sql } from 'slonik'
import { childData, request, signupChild, type ChildService } from '../support/child-service.js'
import { CallbackDriver } from '../support/callback-driver.js'
import { phoneSource, voiceRoute } from '../durability/lib.js'
import { privateRedis, sleep, startNode } from './lib.js'

const embedded = process.env.MASKLINE_TEST_BACKEND === 'embedded' || !process.env.TEST_DATABASE_URL
const singleNode = embedded && 'embedded mode (PGlite, in-process bus) is single-node by design: no second node to reach'

t.test('inactivity over two nodes: PATCH propagates, either node\'s activity counts, one end', { skip: singleNode }, async t => {
  const redis = await privateRedis(t)
  const data = await childData(t)
  const [n1, n2] = await Promise.all([startNode(t, data, redis.url), startNode(t, data, redis.url)]) as [ChildService, ChildService]
  const db = await data.open({ maximumPoolSize: 1 })
  t.teardown(() => db.close())
  const acc = await signupChild(n1.url)
  const phone = phoneSource(3000)
  const agent = phone(), customer = phone()
  const row = async (id: string) => db.pool.one(sql.unsafe`SELECT state, version, ended_at FROM sessions WHERE id = ${id}`) as Promise<{ state: string; version: number; ended_at: number | null }>
  const view = async (n: ChildService, id: string) => (await request(n.url, 'GET', `/v1/sessions/${id}`, { token: acc.token })).body

  const c = await request(n1.url, 'POST', '/v1/sessions', { token: acc.token, body: { agentPhone: agent, customerPhone: customer, inactivityTimeoutMinutes: 30, gracePeriodMinutes: 5 } })
  t.equal(c.status, 201)
  const id = c.body.id as string, proxy = c.body.proxyNumber as string
  const driver2 = new CallbackDriver({ baseUrl: n2.url, mode: 'none' })
  for (let i = 0; i < 100 && (await voiceRoute(driver2, agent, proxy)).kind !== 'connect'; i++) await sleep(20)

  // PATCH on node 2 (the clock restarts there); node 1 holds the new value in memory at once.
  const p = await request(n2.url, 'PATCH', `/v1/sessions/${id}`, { token: acc.token, body: { inactivityTimeoutMinutes: 1 } })
  t.equal(p.status, 200)
  const patchedAt = Date.now()
  let onN1: unknown
  for (const deadline = Date.now() + 3_000; Date.now() < deadline; await sleep(50)) if ((onN1 = (await view(n1, id)).inactivityTimeoutMinutes) === 1) break
  t.equal(onN1, 1, 'node 1 has node 2\'s PATCH')

  // An SMS through node 2, 40 s after the PATCH.
  await sleep(40_000 - (Date.now() - patchedAt))
  const smsAt = Date.now()
  t.equal((await driver2.smsReceived({ from: customer, to: proxy, text: 'still talking', messageId: `cluster-idle-${id}` })).status, 200)
  // 65 s after the PATCH: past its first deadline, 25 s after the SMS: both nodes' timers fired.
  await sleep(65_000 - (Date.now() - patchedAt))
  t.match(await row(id), { state: 'ACTIVE', version: 2 }, 'the SMS through node 2 counted on both nodes')
  // 60 s after the SMS (and a sweep of slack): ended once.
  await sleep(62_500 - (Date.now() - smsAt))
  const ended = await row(id)
  t.match(ended, { state: 'GRACE_PERIOD', version: 3 }, 'ended, one version written')
  t.ok(ended.ended_at! >= smsAt + 60_000 && ended.ended_at! <= smsAt + 62_500, 'about 60 s after the last activity')
  for (const [name, n] of [['node 1', n1], ['node 2', n2]] as const) {
    let v: { state?: string; endedAt?: string } = {}
    for (const deadline = Date.now() + 3_000; Date.now() < deadline; await sleep(50)) if ((v = await view(n, id)).state === 'GRACE_PERIOD') break
    t.match(v, { state: 'GRACE_PERIOD', endedAt: new Date(ended.ended_at!).toISOString() }, `${name} shows the one end`)
  }
})
