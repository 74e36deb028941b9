// client.stream(): typed events of the tenant, and no event lost or repeated across a reconnect.
// The connection goes through a TCP proxy (test/support/tcp-proxy.ts) that the test cuts while
// events keep being committed, then restores: the SDK reconnects with `after=<last id>` and the
// service replays what the client missed. An `after` the service cannot resume from is answered
// with close 4410 and surfaces as { kind: 'resync_required' }, then live events follow.
import t from 'tap'
import { startTestService } from '../support/service.js'
import { startTcpProxy } from '../support/tcp-proxy.js'
import { Maskline, type StreamEvent, type StreamItem } from '../../sdk/src/index.js'
import { sdkTenant, WS } from './sdk-support.js'

const SWAPS = 300

/** Collects a stream's items in the background until `stop()`. */
function collect<T extends StreamItem<any>>(it: AsyncIterable<T>): { items: T[]; until(n: (items: T[]) => boolean, timeoutMs: number, what: string): Promise<void> } {
  const items: T[] = []
  void (async () => { for await (const x of it) items.push(x) })()
  return {
    items,
    async until(done, timeoutMs, what) {
      const end = Date.now() + timeoutMs
      while (!done(items)) {
        if (Date.now() > end) throw new Error(`timed out waiting for ${what} (${items.length} items)`)
        await new Promise(r => setTimeout(r, 20))
      }
    },
  }
}

t.test('a stream cut while events flow resumes after its last id: every event once, in order', async t => {
  // The service's clock moves a minute ahead every 90 swaps: the tier's 100 requests a minute
  // (contract 8.1) would otherwise refuse the rest.
  let offset = 0
  const api = await startTestService(t, { now: () => Date.now() + offset })
  const proxy = await startTcpProxy({ host: '127.0.0.1', port: api.svc.port })
  t.teardown(() => proxy.close())
  const { client, signed } = await sdkTenant(api)
  // The stream's client goes through the proxy; the REST calls go straight to the service.
  const viaProxy = new Maskline({ baseUrl: `http://127.0.0.1:${proxy.port}`, apiKey: signed.apiKey, apiSecret: signed.apiSecret, WebSocket: WS })
  const status: boolean[] = []
  const stream = viaProxy.stream({ types: ['session.target_swapped'], minDelayMs: 50, maxDelayMs: 500, onStatus: c => status.push(c) })
  t.teardown(() => stream.close())
  const got = collect(stream)
  const s = await client.sessions.create({ agentPhone: api.phone(1), customerPhone: api.phone(2) })
  await new Promise(r => setTimeout(r, 200)) // the socket is open (no `after` yet: live from here)
  t.same(status, [true], 'connected')

  for (let i = 0; i < SWAPS; i++) {
    if (i === SWAPS / 3) { await got.until(items => items.length > 0, 10_000, 'the first events'); proxy.down() }
    if (i === (2 * SWAPS) / 3) proxy.up()
    if (i % 90 === 89) offset += 61_000
    await client.sessions.swapTarget(s.id, api.phone(i % 2 === 0 ? 3 : 2))
  }
  await got.until(items => items.length >= SWAPS, 30_000, `${SWAPS} events`)
  await new Promise(r => setTimeout(r, 300)) // nothing more may come
  const events = got.items.map(x => (x.kind === 'event' ? x.event : null))
  t.equal(events.filter(e => e === null).length, 0, 'events only (no resync)')
  const ids = events.map(e => e!.id)
  t.equal(ids.length, SWAPS, `${SWAPS} events, none lost`)
  t.equal(new Set(ids).size, ids.length, 'none repeated')
  t.same(ids, [...ids].sort(), 'in order (ids are time-ordered UUIDv7)')
  const typed: StreamEvent<'session.target_swapped'>[] = events as StreamEvent<'session.target_swapped'>[]
  t.ok(typed.every(e => e.type === 'session.target_swapped' && e.data.sessionId === s.id))
  t.ok(status.length >= 3 && status[1] === false && status.at(-1) === true, `it dropped and came back (${status.join(',')})`)
  t.equal(stream.lastEventId, ids.at(-1), 'lastEventId is the last event received')
})

t.test('an `after` the service cannot resume from: resync_required, then live events', async t => {
  const api = await startTestService(t)
  const { client } = await sdkTenant(api)
  const stream = client.stream({ after: '01800000-0000-7000-8000-000000000000', minDelayMs: 50 })
  t.teardown(() => stream.close())
  const got = collect(stream)
  await got.until(items => items.length > 0, 10_000, 'the resync item')
  t.same(got.items[0], { kind: 'resync_required', after: '01800000-0000-7000-8000-000000000000' })
  await new Promise(r => setTimeout(r, 300)) // reconnected, live
  const s = await client.sessions.create({ agentPhone: api.phone(1), customerPhone: api.phone(2) })
  await got.until(items => items.filter(x => x.kind === 'event').length >= 2, 10_000, 'the session\'s events')
  t.same(got.items.slice(1).map(x => (x.kind === 'event' ? [x.event.type, x.event.data.sessionId] : x.kind)),
    [['session.created', s.id], ['session.activated', s.id]], 'then the live events')
})

t.test('stream() without a WebSocket class says how to get one', async t => {
  const api = await startTestService(t)
  const bare = new Maskline({ baseUrl: api.url, token: 'x', WebSocket: undefined })
  const hasGlobal = typeof (globalThis as { WebSocket?: unknown }).WebSocket === 'function'
  if (hasGlobal) t.ok(bare.stream, 'the global WebSocket is used')
  else t.throws(() => bare.stream(), { name: 'MasklineError', message: /ws package/ })
})
