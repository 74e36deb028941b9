// The stream's id order (gateway/stream/settle.ts) on a real uWS app: events that commit out of id
// order within the settle time go out in id order; one that comes later than that goes at once to
// the sockets already past it, and a resume past it is refused with 4410; a resume's replay (here from an in-memory
// source) and the live events published while it runs meet with no gap and no duplicate.
import t, { type Test } from 'tap'
import uWS from 'uWebSockets.js'
import { buildEnvelope, type EventEnvelope } from '../../sql/vocabulary/event-envelope.js'
import { uuidv7 } from '../../sql/vocabulary/ids.js'
import { registerStream, type StreamOptions } from '../../gateway/stream/stream.js'
import type { ReplaySource } from '../../gateway/stream/resume.js'
import { connectWs, type WsClient } from '../support/ws-client.js'

const silent = { debug() {}, info() {}, warn() {}, error() {} }
const sleep = (ms: number) => new Promise(r => setTimeout(r, ms))

function eventAt(tenantId: string, ms: number, n: number, type: EventEnvelope['type'] = 'session.created'): EventEnvelope {
  const h = ms.toString(16).padStart(12, '0')
  return buildEnvelope(`${h.slice(0, 8)}-${h.slice(8)}-7000-8000-${n.toString(16).padStart(12, '0')}`, type, ms, {
    sessionId: uuidv7(), tenantId, proxyNumber: '+12025550100', state: 'ACTIVE',
  })
}

async function startApp(t: Test, settleMs: number, replay?: ReplaySource, extra: Partial<StreamOptions> = {}) {
  const app = uWS.App()
  let port = 0
  const stream = registerStream(app, {
    ...extra, selfUrl: () => `http://127.0.0.1:${port}`, log: silent, settleMs, ...(replay ? { replay } : {}),
    verifyTenantToken: token => ({ tenantId: token }), // the token is the tenant id here
  })
  const listen = await new Promise<uWS.us_listen_socket>((resolve, reject) => app.listen('127.0.0.1', 0, s => (s ? resolve(s) : reject(new Error('listen')))))
  port = uWS.us_socket_local_port(listen)
  const clients: WsClient[] = []
  t.teardown(() => { for (const c of clients) c.socket.destroy(); stream.closeAll(); uWS.us_listen_socket_close(listen) })
  return {
    stream,
    async connect(tenantId: string, query = '') {
      const c = await connectWs(`http://127.0.0.1:${port}/v1/stream${query}`, { headers: { authorization: `Bearer ${tenantId}` } })
      clients.push(c)
      return c
    },
  }
}

const ids = (c: WsClient) => c.messages.map(m => (JSON.parse(m) as EventEnvelope).id)

t.test('events that commit out of id order within the settle time go out in id order', async t => {
  const s = await startApp(t, 200)
  const a = uuidv7()
  const c = await s.connect(a)
  const now = Date.now()
  const older = eventAt(a, now, 1), newer = eventAt(a, now, 2)
  s.stream.publishEvent(newer) // committed first
  s.stream.publishEvent(older)
  await c.waitForMessages(2, 3_000)
  t.same(ids(c), [older.id, newer.id])
})

t.test('an event later than the settle time goes at once to the sockets past it; a resume past it is refused', async t => {
  const a = uuidv7(), b = uuidv7()
  const sent: EventEnvelope[] = []
  const source: ReplaySource = {
    exists: async (tenantId, id) => sent.some(e => e.id === id && e.data.tenantId === tenantId),
    page: async () => [],
  }
  const s = await startApp(t, 100, source)
  const past = await s.connect(a)
  const otherType = await s.connect(a, '?types=call.ended')
  const otherTenant = await s.connect(b)
  const now = Date.now()
  const second = eventAt(a, now, 2), late = eventAt(a, now - 500, 1) // minted before the one sent, committed 500 ms later
  sent.push(second, late)
  s.stream.publishEvent(second)
  s.stream.publishEvent(eventAt(b, now, 2))
  await past.waitForMessages(1, 3_000)
  await otherTenant.waitForMessages(1, 3_000)
  s.stream.publishEvent(late)
  await past.waitForMessages(2, 3_000)
  t.same(ids(past), [second.id, late.id], 'the late event is delivered behind the larger id, not dropped')
  await sleep(100)
  t.equal(s.stream.connectionCount(), 3, 'no socket is closed: a bus gap is no reason to resynchronise')
  t.same(otherType.messages, [])
  t.equal(otherTenant.messages.length, 1)
  // A client that left with `second` as its cursor may have missed `late`: its resume is refused.
  const resumed = await s.connect(a, `?after=${second.id}`)
  t.equal(await resumed.closed, 4410)
  t.equal(resumed.closeReason, 'resync_required')
})

t.test('a replay and the live events published while it runs meet once each, in order', async t => {
  const a = uuidv7()
  const base = Date.now() - 60_000
  const stored = Array.from({ length: 1_200 }, (_, i) => eventAt(a, base + i, i))
  let pages = 0
  let publishDuring: (() => void) | null = null
  const source: ReplaySource = {
    exists: async (tenantId, id) => tenantId === a && stored.some(e => e.id === id),
    async page(q) {
      if (++pages === 2) publishDuring?.()
      await sleep(20)
      return stored.filter(e => e.id > q.afterId && e.id < q.beforeId).slice(0, q.limit).map(e => ({ id: e.id, json: JSON.stringify(e) }))
    },
  }
  const s = await startApp(t, 100, source)
  const fresh = [eventAt(a, Date.now(), 1), eventAt(a, Date.now(), 2)]
  // Live during the replay: two new events and one the replay also reads (the bus delivering an
  // event the outbox holds already), all committed on time.
  const both = eventAt(a, Date.now(), 0)
  stored.push(both)
  publishDuring = () => { for (const e of [both, ...fresh]) s.stream.publishEvent(e) }
  const c = await s.connect(a, `?after=${stored[9]!.id}`)
  const want = [...stored.slice(10), ...fresh].sort((x, y) => (x.id < y.id ? -1 : 1)).map(e => e.id)
  await c.waitForMessages(want.length, 5_000)
  await sleep(300)
  t.same(ids(c), [...new Set(want)], 'every stored event after the cursor and the live ones, once each, in id order')
})

t.test('a late event a resume has just sent from the outbox is not sent to that socket again; the others get it', async t => {
  // A peer killed between its commit and its publish (gateway/bus.ts): its client resumes here and
  // the replay's pages hold the peer's event; PEER_LOST_MS later this node replays the lost peer and
  // the same event comes late (gateway/stream/resume.ts, "Tail").
  const a = uuidv7()
  const now = Date.now()
  const earlier = eventAt(a, now - 3_000, 1)
  const unpublished = eventAt(a, now - 2_000, 2) // committed by the peer, never on the bus
  const stored = [earlier, unpublished]
  const source: ReplaySource = {
    exists: async (tenantId, id) => tenantId === a && stored.some(e => e.id === id),
    page: async q => stored.filter(e => e.id > q.afterId && e.id < q.beforeId).slice(0, q.limit).map(e => ({ id: e.id, json: JSON.stringify(e) })),
  }
  const s = await startApp(t, 100, source)
  const stayed = await s.connect(a) // live all along: it never got the unpublished event
  const resumed = await s.connect(a, `?after=${earlier.id}`)
  await resumed.waitForMessages(1, 3_000)
  t.same(ids(resumed), [unpublished.id], 'the resume sent it from the outbox')
  await sleep(100) // live now
  const next = eventAt(a, Date.now(), 3)
  s.stream.publishEvent(next)
  await resumed.waitForMessages(2, 3_000)
  s.stream.publishEvent(unpublished) // the lost peer's replay: late
  const last = eventAt(a, Date.now(), 4)
  s.stream.publishEvent(last)
  await resumed.waitForMessages(3, 3_000)
  await stayed.waitForMessages(3, 3_000)
  await sleep(100)
  t.same(ids(resumed), [unpublished.id, next.id, last.id], 'the resumed socket: once')
  t.same(ids(stayed).slice(0, 2), [next.id, unpublished.id], 'the socket live all along gets it, late')
})

t.test('a resume waits at its seam until the other nodes are heard from: a killed node\'s unpublished event goes out in its place, once', async t => {
  const a = uuidv7()
  const before = eventAt(a, Date.now() - 3_000, 1)
  const stored = [before]
  const source: ReplaySource = {
    exists: async (tenantId, id) => tenantId === a && stored.some(e => e.id === id),
    page: async q => stored.filter(e => e.id > q.afterId && e.id < q.beforeId).slice(0, q.limit).map(e => ({ id: e.id, json: JSON.stringify(e) })),
  }
  let heard: () => void = () => {}
  const waiting = new Promise<void>(resolve => { heard = resolve })
  const s = await startApp(t, 100, source, { peersHeard: () => waiting })
  const resumed = await s.connect(a, `?after=${before.id}`)
  await sleep(200) // its pages came back short: it waits at the seam
  const unpublished = eventAt(a, Date.now() - 50, 2) // committed by the killed node, never on the bus
  stored.push(unpublished)
  const live = eventAt(a, Date.now(), 3)
  s.stream.publishEvent(live)
  await sleep(300)
  t.same(ids(resumed), [], 'nothing goes out while it waits')
  heard() // the killed node is taken for lost
  await resumed.waitForMessages(2, 3_000)
  s.stream.publishEvent(unpublished) // the lost node's replay: late
  await sleep(200)
  t.same(ids(resumed), [unpublished.id, live.id], 'in id order, each once')
})

t.test('a late event the replay\'s pages already sent, arriving while it still pages, is dropped: no resync, no duplicate', async t => {
  const a = uuidv7()
  const base = Date.now() - 3_000
  const stored = Array.from({ length: 700 }, (_, i) => eventAt(a, base + i, i))
  const unpublished = stored[100]! // a lost node's event: in the first page, and later replayed late
  let pages = 0
  let s: Awaited<ReturnType<typeof startApp>> | null = null
  const source: ReplaySource = {
    exists: async (tenantId, id) => tenantId === a && stored.some(e => e.id === id),
    async page(q) {
      if (++pages === 2) s!.stream.publishEvent(unpublished) // the cursor is past it now
      return stored.filter(e => e.id > q.afterId && e.id < q.beforeId).slice(0, q.limit).map(e => ({ id: e.id, json: JSON.stringify(e) }))
    },
  }
  s = await startApp(t, 100, source)
  const resumed = await s.connect(a, `?after=${stored[0]!.id}`)
  await resumed.waitForMessages(699, 5_000)
  await sleep(200)
  t.equal(s.stream.connectionCount(), 1, 'not told to resynchronise')
  t.same(ids(resumed), stored.slice(1).map(e => e.id), 'every event after the cursor once, in order')
})
