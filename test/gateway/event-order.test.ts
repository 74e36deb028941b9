// gateway/event-order.ts: another node's events wait for this node's reload of their session, so
// a WebSocket client never hears of a change before the node it is connected to routes by it
// (test/cluster/two-node.test.ts once saw node 1's client get node 2's swap while node 1 still
// routed to the old customer); per-session order holds across held and immediate events.
import t from 'tap'
import { buildEnvelope, type EventEnvelope, type EventType } from '../../sql/vocabulary/event-envelope.js'
import { createEventOrder } from '../../gateway/event-order.js'

const TENANT = '01890a5d-ac96-774b-bcce-b302099a8057'
let n = 0
function ev(sessionId: string | undefined, type: EventType = 'session.target_swapped'): EventEnvelope {
  return buildEnvelope(`e${++n}`, type, Date.now(), { ...(sessionId ? { sessionId } : {}), tenantId: TENANT, proxyNumber: '+12025550100' })
}

function harness(waitMs = 5_000) {
  const delivered: string[] = []
  const reloads = new Map<string, { done: Promise<void>; finish: () => void }>()
  const errors: unknown[] = []
  let failNext = false
  const order = createEventOrder({
    deliver: e => {
      if (failNext) { failNext = false; throw new Error('socket gone') }
      delivered.push(`${e.data.sessionId ?? '-'}:${e.id}`)
    },
    reloadUnderWay: id => reloads.get(id)?.done ?? null,
    waitMs,
    onError: err => errors.push(err),
  })
  function reload(id: string) {
    let finish!: () => void
    const done = new Promise<void>(r => { finish = r })
    const entry = { done, finish: () => { reloads.delete(id); finish() } }
    reloads.set(id, entry)
    return entry
  }
  return { order, delivered, reload, errors, failNext: () => { failNext = true } }
}

const settle = () => new Promise(r => setImmediate(r))

t.test('nothing under way: every event goes out at once, in order', async t => {
  const h = harness()
  const a = ev('s1'), b = ev('s1'), c = ev(undefined, 'pool.low')
  h.order.remote(a)
  h.order.local(b)
  h.order.remote(c)
  t.same(h.delivered, [`s1:${a.id}`, `s1:${b.id}`, `-:${c.id}`], 'synchronously, nothing held')
  t.equal(h.order.held, 0)
})

t.test('a remote event waits for its session\'s reload; later events of that session queue behind it; others pass', async t => {
  const h = harness()
  const r = h.reload('s1')
  const swapped = ev('s1'), ended = ev('s1', 'session.expired'), other = ev('s2')
  h.order.remote(swapped)
  h.order.remote(ended)
  h.order.remote(other)
  await settle()
  t.same(h.delivered, [`s2:${other.id}`], 'the other session\'s event went out; s1\'s wait for its reload')
  t.equal(h.order.held, 1)
  // This node's own event of s1 (its state is in memory already) still comes after the held ones.
  const mine = ev('s1', 'call.incoming')
  h.order.local(mine)
  await settle()
  t.same(h.delivered, [`s2:${other.id}`], 'a local event of s1 queues behind the held ones')
  r.finish()
  await settle()
  t.same(h.delivered, [`s2:${other.id}`, `s1:${swapped.id}`, `s1:${ended.id}`, `s1:${mine.id}`], 'after the reload: s1\'s events in their order')
  t.equal(h.order.held, 0, 'nothing left held')
  const later = ev('s1')
  h.order.remote(later)
  t.same(h.delivered.at(-1), `s1:${later.id}`, 'once drained, the next event goes out at once')
})

t.test('a local event with a reload under way but nothing held goes out at once', async t => {
  const h = harness()
  h.reload('s1')
  const mine = ev('s1')
  h.order.local(mine)
  t.same(h.delivered, [`s1:${mine.id}`])
})

t.test('a reload that never ends holds its events for waitMs only', async t => {
  const h = harness(40)
  h.reload('s1')
  const e = ev('s1')
  const t0 = Date.now()
  h.order.remote(e)
  await new Promise(r => setTimeout(r, 10))
  t.same(h.delivered, [], 'held while the reload runs')
  while (h.delivered.length === 0 && Date.now() - t0 < 2_000) await new Promise(r => setTimeout(r, 5))
  t.same(h.delivered, [`s1:${e.id}`], 'delivered after the wait')
  t.ok(Date.now() - t0 >= 35, `not before the wait (${Date.now() - t0} ms)`)
})

t.test('a held event whose delivery throws is reported, and the session\'s later events still go out', async t => {
  const h = harness()
  const r = h.reload('s1')
  const a = ev('s1'), b = ev('s1')
  h.order.remote(a)
  h.order.remote(b)
  h.failNext()
  r.finish()
  await settle()
  t.equal(h.errors.length, 1, 'the failure is reported')
  t.same(h.delivered, [`s1:${b.id}`], 'the next event is delivered')
  t.equal(h.order.held, 0)
})
