// A peer's death is a bus gap (gateway/bus.ts): a node SIGKILLed between a commit and its publish
// never announces what it committed, so every node says it is alive at least every HEARTBEAT_MS
// and goodbye when it stops; a reader reports a 'peer-lost' gap from a silent peer's last entry.
// Real Redis (a private redis-server); the "peers" are raw XADDs shaped as a node's entries.
import t from 'tap'
import { Redis } from 'ioredis'
import { createRedisBus, HEARTBEAT_MS, type GapReason } from '../../gateway/bus.js'
import { privateRedis } from '../support/redis-server.js'

const sleep = (ms: number) => new Promise(r => setTimeout(r, ms))
const PEER_LOST_MS = 1_500

async function setup(t: { teardown(fn: () => unknown): void }) {
  const redis = await privateRedis(t)
  const stream = `maskline:bus:peers-${process.pid}`
  const bus = createRedisBus(Redis, { url: redis.url, nodeId: 'reader', stream, onError: () => {}, peerLostMs: PEER_LOST_MS })
  t.teardown(() => bus.close())
  const gaps: Array<{ reason: GapReason; from: number }> = []
  bus.onGap((reason, from) => gaps.push({ reason, from }))
  const messages: unknown[] = []
  bus.onMessage(m => messages.push(m))
  bus.start()
  const raw = redis.client()
  const say = (node: string, body: string) => raw.xadd(stream, '*', 'n', node, 'm', body)
  await sleep(300) // the reader's first XREAD is under way ('$': entries from now on)
  return { bus, gaps, messages, say, raw, stream, redisUrl: redis.url }
}

t.test('a peer that falls silent without a goodbye is reported once, from its last entry', async t => {
  const { gaps, messages, say } = await setup(t)
  for (let i = 0; i < 3; i++) { await say('peer-a', '{"kind":"alive"}'); await sleep(200) }
  const lastAt = Date.now()
  await say('peer-a', JSON.stringify({ kind: 'tenant', id: 't1' }))
  t.same(gaps, [], 'no gap while it speaks')
  for (const end = Date.now() + PEER_LOST_MS + 3_000; gaps.length === 0 && Date.now() < end;) await sleep(50)
  t.equal(gaps.length, 1, 'one gap')
  t.equal(gaps[0]?.reason, 'peer-lost')
  t.ok(Math.abs(gaps[0]!.from - lastAt) < 1_000, `from its last entry (${gaps[0]!.from - lastAt} ms)`)
  t.ok(gaps[0]!.from <= Date.now() - PEER_LOST_MS, 'after PEER_LOST_MS of silence')
  t.same(messages, [{ kind: 'tenant', id: 't1' }], 'heartbeats never reach the handlers')
  await sleep(PEER_LOST_MS + 500)
  t.equal(gaps.length, 1, 'reported once, not at every turn')
})

t.test('a peer that says goodbye, or keeps its heartbeat, is never reported', async t => {
  const { gaps, say } = await setup(t)
  await say('leaver', '{"kind":"alive"}')
  await say('leaver', '{"kind":"bye"}')
  for (const end = Date.now() + PEER_LOST_MS * 2 + 500; Date.now() < end;) {
    await say('steady', '{"kind":"alive"}')
    await sleep(HEARTBEAT_MS / 2)
  }
  t.same(gaps, [], 'no gap')
})

t.test('a bus with nothing to publish heartbeats, and says goodbye after its last message when it closes', async t => {
  const { raw, stream, redisUrl } = await setup(t)
  const quiet = createRedisBus(Redis, { url: redisUrl, nodeId: 'quiet', stream, onError: () => {} })
  quiet.start()
  await sleep(HEARTBEAT_MS * 2.5)
  quiet.publish([{ kind: 'tenant', id: 't2' }])
  await quiet.close()
  const bodies = (await raw.xrange(stream, '-', '+')).filter(([, f]) => f[1] === 'quiet').map(([, f]) => f[3])
  const alive = bodies.filter(b => b === '{"kind":"alive"}').length
  t.ok(alive >= 1 && alive <= 4, `idle: a heartbeat at least every ${HEARTBEAT_MS} ms (${alive} in ${HEARTBEAT_MS * 2.5} ms)`)
  t.same(bodies.slice(-2), [JSON.stringify({ kind: 'tenant', id: 't2' }), '{"kind":"bye"}'], 'its last message, then goodbye')
})

t.test('peersHeard: resolves once every known peer wrote after `since`, or was lost, or at the timeout', async t => {
  const { bus, say } = await setup(t)
  await say('p1', '{"kind":"alive"}')
  await say('p2', '{"kind":"alive"}')
  await sleep(300)
  const since = Date.now()
  let done = false
  const heard = bus.peersHeard(since, 10_000).then(() => { done = true })
  await sleep(300)
  t.notOk(done, 'not while a peer has written nothing since')
  await say('p1', '{"kind":"alive"}')
  await sleep(300)
  t.notOk(done, 'not while one of them is still silent')
  const t0 = Date.now()
  await heard // p2 stays silent: taken for lost after PEER_LOST_MS
  t.ok(Date.now() - t0 < PEER_LOST_MS + 2_000, `then when the silent one is lost (${Date.now() - t0} ms)`)
  const t1 = Date.now()
  await say('p3', '{"kind":"alive"}')
  await sleep(300)
  await bus.peersHeard(Date.now(), 500)
  t.ok(Date.now() - t1 < 1_500, 'a timeout bounds the wait')
})
