// A stream client resumes on another node (`GET /v1/stream?after=`): two real nodes on one
// Postgres and one Redis, sessions created through both while the client is cut again and again
// and reconnects to the other node each time with the last id it got. It ends with every event of
// its tenant after its first one, once each, in id order (checked against the outbox).
import t from 'tap'
import { sql } from 'slonik'
import { childData, request, signupChild, startChild } from '../support/child-service.js'
import { connectWs } from '../support/ws-client.js'
import type { EventEnvelope } from '../../sql/vocabulary/event-envelope.js'

const embedded = process.env.MASKLINE_TEST_BACKEND === 'embedded' || !process.env.TEST_DATABASE_URL
const sleep = (ms: number) => new Promise(r => setTimeout(r, ms))

t.test('a client cut on one node resumes on the other with nothing lost or repeated', { skip: embedded && 'embedded mode is single-node by design' }, async t => {
  if (!process.env.TEST_REDIS_URL) throw new Error('services mode needs TEST_REDIS_URL: the nodes meet on the Redis bus')
  const data = await childData(t)
  const nodes = await Promise.all([startChild(t, data), startChild(t, data)])
  const acct = await signupChild(nodes[0]!.url)
  const open = (n: number, after?: string) =>
    connectWs(`${nodes[n % 2]!.url}/v1/stream${after ? `?after=${after}` : ''}`, { headers: { authorization: `Bearer ${acct.token}` } })

  const first = await open(0)
  const s0 = await request(nodes[0]!.url, 'POST', '/v1/sessions', { token: acct.token, body: { agentPhone: '+14155552000', customerPhone: '+14155553000' } })
  t.equal(s0.status, 201)
  await first.waitForMessages(1, 10_000)
  const start = (JSON.parse(first.messages[0]!) as EventEnvelope).id
  first.socket.destroy()

  // Sessions created through both nodes, three at a time: each node's events reach the other by the bus.
  const CREATES = 30
  let made = 0
  const statuses: number[] = []
  let done = false
  const flow = Promise.all(Array.from({ length: 3 }, async () => {
    while (made < CREATES) {
      const n = made++
      const r = await request(nodes[n % 2]!.url, 'POST', '/v1/sessions', { token: acct.token, body: { agentPhone: `+1415555${2100 + n}`, customerPhone: `+1415555${3100 + n}` } })
      statuses.push(r.status)
    }
  })).then(() => { done = true })

  const got: string[] = []
  let hops = 0
  while (!done || hops < 4) {
    const c = await open(++hops, got.at(-1) ?? start)
    await sleep(300 + Math.random() * 300)
    c.socket.destroy()
    got.push(...c.messages.map(m => (JSON.parse(m) as EventEnvelope).id))
  }
  await flow
  const db = await data.open({ maximumPoolSize: 1 })
  const want = await db.pool.anyFirst(sql.unsafe`SELECT id FROM outbox WHERE tenant_id = ${acct.tenantId} AND id > ${start}::uuid ORDER BY id`) as string[]
  await db.close()
  const last = await open(++hops, got.at(-1) ?? start)
  await last.waitForMessages(want.length - got.length, 10_000).catch(() => {})
  await sleep(500)
  last.socket.destroy()
  got.push(...last.messages.map(m => (JSON.parse(m) as EventEnvelope).id))

  t.same(statuses.filter(s => s !== 201), [], 'every create answered 201')
  t.ok(hops >= 5, `${hops} connections, alternating between the two nodes`)
  t.ok(want.length >= 2 * CREATES, `${want.length} events after the first`)
  t.equal(new Set(got).size, got.length, '0 duplicated')
  t.same(want.filter(id => !got.includes(id)), [], '0 lost')
  t.same(got, want, 'in id order')
})
