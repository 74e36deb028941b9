// docs/memory-bounds.md: structures bounded by time or count, filled far past what they hold at rest
// and watched going back down or stopping at their bound (the count-and-time windows are in test/gateway/recent.test.ts, the
// limiter's keys in test/api/ratelimit-bounds.test.ts, tombstones in test/engine/tombstones.test.ts).
import t from 'tap'
import { createCallCounter } from '../../api/app/call-counter.js'
import type { Engine, LiveView } from '../../engine/index.js'
import { createEventOrder } from '../../gateway/event-order.js'
import { clientIpResolver, PEER_CACHE_MAX } from '../../gateway/http/client-ip.js'
import { MAX_TEXTS, queryConfig, statementCacheSizes } from '../../sql/direct.js'
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

t.test('client addresses: 5,000 peers behind trusted proxies cache at most PEER_CACHE_MAX spellings, and answer right past it', async t => {
  const resolve = clientIpResolver(['10.0.0.5'])
  let wrong = 0
  for (let i = 0; i < 5_000; i++) if (resolve(`192.0.${i >> 8}.${i & 255}`, '203.0.113.9') !== `192.0.${i >> 8}.${i & 255}`) wrong++
  t.equal(wrong, 0, 'each untrusted peer is the client')
  t.equal(resolve.cachedPeers, PEER_CACHE_MAX, 'the cache stopped at its bound')
  t.equal(resolve('10.0.0.5', '203.0.113.9'), '203.0.113.9', 'a trusted proxy first seen past the bound is still believed')
  t.equal(resolve.cachedPeers, PEER_CACHE_MAX)
})

t.test('direct statements: 2,000 distinct texts name at most MAX_TEXTS and convert at most 4 × MAX_TEXTS; past that they run unnamed', async t => {
  const before = statementCacheSizes()
  let unnamed = 0
  let wrong = 0
  for (let i = 0; i < 2_000; i++) {
    const config = queryConfig({ sql: `/* prepared */ SELECT ${i} AS n WHERE $slonik_1 = 1`, values: [1] }, true)
    if (config.text !== `/* prepared */ SELECT ${i} AS n WHERE $1 = 1`) wrong++
    if (config.name === undefined) unnamed++
  }
  t.equal(wrong, 0, 'every text converted, cached or not')
  const after = statementCacheSizes()
  t.ok(after.names <= MAX_TEXTS && after.names >= Math.min(MAX_TEXTS, before.names + 1), `names ${after.names} ≤ ${MAX_TEXTS}`)
  t.ok(after.texts <= 4 * MAX_TEXTS, `texts ${after.texts} ≤ ${4 * MAX_TEXTS}`)
  t.ok(unnamed >= 2_000 - MAX_TEXTS, 'statements past the bound run unnamed')
})

t.test('call counter: 10,000 routed calls leave nothing pending once their records settle or are announced', async t => {
  const noted: string[] = []
  const live = { id: 's1', noteCall: () => null, unnoteCall: () => { noted.push('undo') } }
  const engine = { live: () => live } as unknown as Engine
  const counter = createCallCounter(engine)
  for (let i = 0; i < 10_000; i++) counter.routed(live as unknown as LiveView, `c${i}`, i)
  t.equal(counter.pending, 10_000, 'pending while the records are written behind')
  counter.committed(Array.from({ length: 5_000 }, (_, i) => ({ id: `e${i}`, type: 'call.incoming', createdAt: new Date(i).toISOString(), data: { sessionId: 's1', callId: `c${i}` } }) as unknown as EventEnvelope))
  t.equal(counter.pending, 5_000, 'an announced record is no longer pending')
  for (let i = 0; i < 10_000; i++) counter.settled(`c${i}`)
  t.equal(counter.pending, 0, 'nothing pending once every operation settled')
  t.equal(noted.length, 5_000, 'the calls never announced were taken back')
})
