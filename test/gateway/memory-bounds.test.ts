// docs/memory-bounds.md: structures bounded by time, filled far past what they hold at rest and
// watched going back down (the count-and-time windows are in test/gateway/recent.test.ts, the
// limiter's keys in test/api/ratelimit-bounds.test.ts, tombstones in test/engine/tombstones.test.ts).
import t from 'tap'
import { createEventOrder } from '../../gateway/event-order.js'
import type { EventEnvelope } from '../../sql/vocabulary/event-envelope.js'

t.test('event order: events of 5,000 sessions whose reloads never end are held at most waitMs, then nothing is held', async t => {
  const delivered: string[] = []
  const order = createEventOrder({
    deliver: e => { delivered.push(e.id) },
    reloadUnderWay: () => new Promise<void>(() => {}), // Postgres away: the reload never ends
    waitMs: 30,
    onError: err => t.fail(String(err)),
  })
  for (let i = 0; i < 5_000; i++) {
    order.remote({ id: `e${i}`, type: 'session.created', createdAt: new Date(0).toISOString(), data: { sessionId: `s${i}` } } as unknown as EventEnvelope)
  }
  t.equal(order.held, 5_000, 'held while the reloads run')
  for (let waited = 0; order.held > 0 && waited < 5_000; waited += 10) await new Promise(r => setTimeout(r, 10))
  t.equal(order.held, 0, 'nothing held once waitMs has passed')
  t.equal(delivered.length, 5_000, 'every event went out')
})
