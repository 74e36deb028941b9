// Events to WebSocket clients through bus gaps (docs/scaling.md): what the bus lost is replayed from the
// outbox (gateway/replay.ts). Real service processes, one Postgres, a private redis-server.
// - Redis SIGKILLed for 10 s while both nodes create, swap and end sessions and take calls; it
//   comes back empty. Afterwards every client (one on each node) has received every event of its
//   tenant the outbox holds, exactly once, each session's in id order.
//   During the outage each node changes only the sessions it created: a session changed on one
//   node and then on the other within one gap gets the first node's event late on the second
//   (documented in docs/scaling.md, not avoidable by the node that learns of it afterwards).
// - Node 2 SIGSTOPped while node 1 writes past the stream's trim (BUS_MAXLEN=100), resumed: its
//   client gets what it missed, exactly once, in order.
// - A peer killed between a commit and its publish (it said it was alive, never goodbye): the node
//   left replays from the peer's last entry and its client gets the event the peer never published.
// - The replay's read is a range scan of the outbox's primary key (no index of its own).
// Embedded mode (PGlite, in-process bus) is single-node by design: skipped there with the reason.
import t, { type Test } from 'tap'
import { sql, type DatabasePool } from 'slonik'
import { busStream, childData, request, signupChild, type ChildService } from '../support/child-service.js'
import { connectWs, type WsClient } from '../support/ws-client.js'
import { CallbackDriver } from '../support/callback-driver.js'
import { phoneSource, voiceRoute } from '../durability/lib.js'
import { EVENT_TYPES, newEnvelope } from '../../sql/vocabulary/event-envelope.js'
import { insertOutbox } from '../../sql/outbox.js'
import { PEER_LOST_MS } from '../../gateway/bus.js'
import { create, endSession, enterpriseTenant, privateRedis, redisOutageUnderLoad, sleep, startNode, swapTo, type Sess } from './lib.js'

const embedded = process.env.MASKLINE_TEST_BACKEND === 'embedded' || !process.env.TEST_DATABASE_URL
const singleNode = embedded && 'embedded mode (PGlite, in-process bus) is single-node by design: no second node, no bus to lose events'
/** A sweep period longer than the test: whatever the clients get comes from the gap handling. */
const SLOW_SWEEP = '120000'

interface Ev { id: string; type: string; data: { tenantId: string; sessionId?: string } }

async function clientOn(t: Test, node: ChildService, token: string): Promise<WsClient> {
  const ws = await connectWs(`${node.url}/v1/stream`, { headers: { authorization: `Bearer ${token}` } })
  t.teardown(() => ws.close())
  return ws
}

/** The tenant's stream events in the outbox, in id order. */
async function outboxIds(pool: DatabasePool, tenantId: string): Promise<string[]> {
  return await pool.anyFirst(sql.unsafe`
    SELECT id::text FROM outbox WHERE tenant_id = ${tenantId} AND type = ANY(${sql.array([...EVENT_TYPES], 'text')}) ORDER BY id`) as string[]
}

/** What differs between a client's messages and the outbox: missing, duplicated, unknown, out of order. */
function audit(ws: WsClient, want: readonly string[]): { missing: string[]; dup: string[]; extra: string[]; disorder: string[] } {
  const got = ws.messages.map(m => JSON.parse(m) as Ev)
  const wanted = new Set(want)
  const seen = new Set<string>()
  const dup: string[] = [], extra: string[] = [], disorder: string[] = []
  const lastOf = new Map<string, string>()
  for (const e of got) {
    if (seen.has(e.id)) dup.push(e.id)
    seen.add(e.id)
    if (!wanted.has(e.id)) extra.push(`${e.type} ${e.id}`)
    const sid = e.data.sessionId
    if (sid === undefined) continue
    const prev = lastOf.get(sid)
    if (prev !== undefined && prev > e.id) disorder.push(`${sid}: ${e.type} ${e.id} after ${prev}`)
    else lastOf.set(sid, e.id)
  }
  return { missing: want.filter(id => !seen.has(id)), dup, extra, disorder }
}

/** Waits until every client holds as many distinct events as the outbox (or the time is up). */
async function settle(pool: DatabasePool, tenantId: string, clients: WsClient[], ms: number): Promise<string[]> {
  let want: string[] = []
  for (const deadline = Date.now() + ms; Date.now() < deadline;) {
    await sleep(500)
    want = await outboxIds(pool, tenantId)
    if (clients.every(ws => audit(ws, want).missing.length === 0)) break
  }
  await sleep(1_000) // a duplicate, if any, would have come by now
  return outboxIds(pool, tenantId)
}

function check(t: Test, name: string, ws: WsClient, want: readonly string[]) {
  const a = audit(ws, want)
  t.comment(`${name}: ${ws.messages.length} messages, ${want.length} events in the outbox; missing ${a.missing.length}, duplicated ${a.dup.length}, unknown ${a.extra.length}, out of order ${a.disorder.length}`)
  t.same(a.missing.slice(0, 10), [], `${name} got every event of its tenant (${want.length})`)
  t.same(a.dup.slice(0, 10), [], `${name} got none twice`)
  t.same(a.extra.slice(0, 10), [], `${name} got nothing the outbox does not hold`)
  t.same(a.disorder.slice(0, 10), [], `${name} got each session's events in id order`)
}

t.test('Redis SIGKILLed for 10 s under load on both nodes: every client gets every event once, in order', { skip: singleNode }, async t => {
  const redis = await privateRedis(t)
  const data = await childData(t)
  const env = { RECONCILE_MS: SLOW_SWEEP }
  const nodes = await Promise.all([startNode(t, data, redis.url, env), startNode(t, data, redis.url, env)]) as [ChildService, ChildService]
  const acc = await enterpriseTenant(data, nodes, redis.client())
  const clients = [await clientOn(t, nodes[0], acc.token), await clientOn(t, nodes[1], acc.token)]
  await sleep(200)
  const phone = phoneSource(1000)
  const failures: string[] = []
  let ops = 0

  // Each node creates, swaps, ends (grace 0: expires at once; the expiry is any node's) and takes
  // calls, on the sessions it created itself, one request at a time.
  async function worker(node: ChildService, seed: number, stopped: () => boolean) {
    const mine: Sess[] = []
    const driver = new CallbackDriver({ baseUrl: node.url, mode: 'none' })
    let k = seed
    while (!stopped()) {
      k = (k * 1103515245 + 12345) % 2147483648
      const pick = k % 10
      const live = mine.filter(s => !s.ended)
      if (pick < 4 || live.length < 4) {
        const s = await create(node.url, acc.token, phone(), phone(), 0)
        if (typeof s === 'string') failures.push(s)
        else mine.push(s)
      } else {
        const s = live[k % live.length]!
        if (pick < 6) {
          const r = await voiceRoute(driver, s.agent, s.proxy)
          if (r.kind !== 'connect') failures.push(`call ${JSON.stringify(r)}`)
        } else if (pick < 8) {
          await swapTo(node.url, acc.token, s, phone(), failures)
        } else {
          await endSession(node.url, acc.token, s, failures)
        }
      }
      ops++
      await sleep(30)
    }
  }
  const { opsDuring, backAt } = await redisOutageUnderLoad(redis, stopped => Promise.all([worker(nodes[0], 1, stopped), worker(nodes[1], 2, stopped)]), () => ops)
  t.same(failures.slice(0, 10), [], 'every request of the load succeeded')
  t.comment(`load: ${ops} requests, ${opsDuring} during the 10 s outage`)

  const db = await data.open({ maximumPoolSize: 2 })
  t.teardown(() => db.close())
  const want = await settle(db.pool, acc.tenantId, clients, 20_000)
  for (const [i, n] of nodes.entries()) {
    const lines = n.lines.filter(l => l.includes('replayed events from the outbox') || l.includes('bus gap'))
      .map(l => JSON.parse(l) as { msg: string; time: number; reason?: string; read?: number; sent?: number; ms?: number })
    t.comment(`node ${i + 1}: ${lines.map(o => (o.reason ? `gap (${o.reason})` : `replay read ${o.read} sent ${o.sent} in ${o.ms} ms`) + ` at ${o.time - backAt} ms`).join('; ')} (times from Redis's return)`)
  }
  check(t, 'node 1\'s client', clients[0]!, want)
  check(t, 'node 2\'s client', clients[1]!, want)

  // The replay's read: a range scan of the primary key, the tenant a filter.
  // A table this small may be read whole (a sequential scan is cheaper than any index here), so
  // the planner is told not to: what is checked is which index the query's shape can use.
  const plan = (await db.pool.transaction(async tx => {
    await tx.query(sql.unsafe`SET LOCAL enable_seqscan = off`)
    return tx.anyFirst(sql.unsafe`
      EXPLAIN SELECT envelope FROM outbox WHERE id > '00000000-0000-0000-0000-000000000000'::uuid
        AND tenant_id = ANY(${sql.array([acc.tenantId], 'uuid')}) ORDER BY id LIMIT 500`)
  }) as string[]).join('\n')
  // (On this small table the planner may take the pkey through a bitmap; on a large one the LIMIT
  // makes it a plain index scan. Either way the outbox's primary key, no index of its own.)
  t.match(plan, /Index Cond: \(id > /, `the replay reads a range of the outbox's primary key:\n${plan}`)
  t.match(plan, /on outbox_pkey/, 'through outbox_pkey')
})

t.test('node 2 paused past the stream\'s trim: its client gets what it missed, once, in order', { skip: singleNode }, async t => {
  const redis = await privateRedis(t)
  const data = await childData(t)
  const env = { RECONCILE_MS: SLOW_SWEEP, BUS_MAXLEN: '100' }
  const [n1, n2] = await Promise.all([startNode(t, data, redis.url, env), startNode(t, data, redis.url, env)]) as [ChildService, ChildService]
  const looker = redis.client()
  const acc = await enterpriseTenant(data, [n1, n2], looker)
  const stream = await busStream(data)
  const clients = [await clientOn(t, n1, acc.token), await clientOn(t, n2, acc.token)]
  await sleep(200)
  const phone = phoneSource(1000)
  const sessions: Sess[] = []
  for (let i = 0; i < 20; i++) {
    const s = await create(n1.url, acc.token, phone(), phone(), 0)
    if (typeof s === 'string') { t.fail(s); return }
    sessions.push(s)
  }
  await sleep(500)
  const before = (await looker.xrevrange(stream, '+', '-', 'COUNT', 1))[0]![0]
  n2.kill('SIGSTOP')
  const stoppedAt = Date.now()
  t.teardown(() => n2.kill('SIGCONT'))
  const driver = new CallbackDriver({ baseUrl: n1.url, mode: 'none' })
  for (const s of sessions.slice(0, 10)) {
    const c = phone()
    const r = await request(n1.url, 'PATCH', `/v1/sessions/${s.id}/target`, { token: acc.token, body: { customerPhone: c } })
    t.equal(r.status, 200, 'swapped on node 1')
    await voiceRoute(driver, s.agent, s.proxy)
    const e = await request(n1.url, 'POST', `/v1/sessions/${s.id}/end`, { token: acc.token })
    t.equal(e.status, 200, 'ended on node 1')
  }
  for (let i = 0; i < 120; i++) {
    const s = await create(n1.url, acc.token, phone(), phone(), 0)
    if (typeof s === 'string') { t.fail(s); return }
  }
  const oldest = (await looker.xrange(stream, '-', '+', 'COUNT', 1))[0]![0]
  const [om, os] = oldest.split('-').map(Number) as [number, number]
  const [bm, bs] = before.split('-').map(Number) as [number, number]
  t.ok(om > bm || (om === bm && os > bs), `the stream was trimmed past what node 2 had read (${before} < ${oldest})`)
  await sleep(Math.max(1_500, 3_000 - (Date.now() - stoppedAt)))
  n2.kill('SIGCONT')

  const db = await data.open({ maximumPoolSize: 2 })
  t.teardown(() => db.close())
  const want = await settle(db.pool, acc.tenantId, clients, 15_000)
  t.ok(n2.lines.some(l => l.includes('bus gap') && l.includes('trimmed')), 'node 2 saw the trim gap')
  check(t, 'node 1\'s client', clients[0]!, want)
  check(t, 'node 2\'s client (paused)', clients[1]!, want)
})

t.test('a peer killed between its commit and its publish: its event still reaches the clients of the node left', { skip: singleNode }, async t => {
  const redis = await privateRedis(t)
  const data = await childData(t)
  const node = await startNode(t, data, redis.url, { RECONCILE_MS: SLOW_SWEEP })
  const acc = await signupChild(node.url)
  const s = await create(node.url, acc.token, '+14155550101', '+14155550102')
  if (typeof s === 'string') { t.fail(s); return }
  const ws = await clientOn(t, node, acc.token)
  const db = await data.open({ maximumPoolSize: 1 })
  t.teardown(() => db.close())
  const [created] = await outboxIds(db.pool, acc.tenantId) as [string]
  const stream = await busStream(data)
  const looker = redis.client()
  // The peer as the node hears it: alive on the bus, then it commits an event and is killed before
  // publishing it (no goodbye).
  for (let i = 0; i < 3; i++) { await looker.xadd(stream, '*', 'n', 'peer-killed', 'm', '{"kind":"alive"}'); await sleep(300) }
  const lost = newEnvelope('call.incoming', Date.now(), { sessionId: s.id, tenantId: acc.tenantId, proxyNumber: s.proxy, callId: '00000000-0000-7000-8000-00000000c0de', direction: 'inbound' })
  await insertOutbox(db.pool, [lost])
  const diedAt = Date.now()
  // A client of the dead peer resumes here at once, from before its event; a live event follows.
  const resumed = await connectWs(`${node.url}/v1/stream?after=${created}`, { headers: { authorization: `Bearer ${acc.token}` } })
  t.teardown(() => resumed.close())
  const next = await create(node.url, acc.token, '+14155550103', '+14155550104')
  if (typeof next === 'string') { t.fail(next); return }
  for (const end = Date.now() + 15_000; !ws.messages.some(m => m.includes(lost.id)) && Date.now() < end;) await sleep(100)
  t.ok(ws.messages.some(m => m.includes(lost.id)), `the client got it ${Date.now() - diedAt} ms after the peer died (PEER_LOST_MS ${PEER_LOST_MS})`)
  const sawIt = () => node.lines.some(l => l.includes('bus gap') && l.includes('peer-lost'))
  for (const end = Date.now() + 5_000; !sawIt() && Date.now() < end;) await sleep(100) // log lines are written in batches
  t.ok(sawIt(), 'the node saw the peer lost')
  t.equal(ws.messages.filter(m => m.includes(lost.id)).length, 1, 'once')
  // The resumed client: the lost event in its place (its seam waited for the peer to be heard or
  // lost), then the live one, each once.
  const want = (await outboxIds(db.pool, acc.tenantId)).filter(id => id > created)
  await resumed.waitForMessages(want.length, 15_000).catch(() => {})
  await sleep(1_500)
  const got = resumed.messages.map(m => (JSON.parse(m) as Ev).id)
  t.same(got, want, `the resumed client got ${want.length} events after its cursor, the lost one in id order, each once`)
  t.ok(got.includes(lost.id), 'the lost event among them')
})
