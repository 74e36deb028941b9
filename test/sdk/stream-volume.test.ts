// client.stream() under volume: 10,000 events while the consumer stalls (the SDK stops reading
// its socket meanwhile) and a TCP proxy cuts the connection and restores it: the SDK reconnects
// with its last id and the service replays what it missed, each event once, in order. (A close by
// the service itself, a deploy, and a node's death: test/cluster/sdk-stream-failover.test.ts.)
// A file of its own: it is the longest of the SDK's stream tests.
import t from 'tap'
import { CallbackDriver } from '../support/callback-driver.js'
import { startTestService } from '../support/service.js'
import { startTcpProxy } from '../support/tcp-proxy.js'
import { Maskline } from '../../sdk/src/index.js'
import { sdkTenant, WS } from './sdk-support.js'

t.test('10,000 events through a slow consumer and a cut TCP connection: each once, in order', async t => {
  const api = await startTestService(t)
  const proxy = await startTcpProxy({ host: '127.0.0.1', port: api.svc.port })
  t.teardown(() => proxy.close())
  const { signed } = await sdkTenant(api)
  const client = new Maskline({ baseUrl: `http://127.0.0.1:${proxy.port}`, apiKey: signed.apiKey, apiSecret: signed.apiSecret, WebSocket: WS })
  const s = await client.sessions.create({ agentPhone: api.phone(1), customerPhone: api.phone(2) })
  const status: boolean[] = []
  const stream = client.stream({ types: ['call.incoming'], minDelayMs: 50, maxDelayMs: 500, highWaterMark: 64, onStatus: c => status.push(c) })
  t.teardown(() => stream.close())
  const ids: string[] = []
  let stalled = false
  void (async () => {
    for await (const x of stream) {
      if (x.kind !== 'event') { ids.push(`unexpected ${x.kind}`); continue }
      ids.push(x.event.id)
      // A consumer that stops for a while: the SDK stops reading the socket meanwhile.
      if (ids.length === 1_000) { stalled = true; await new Promise(r => setTimeout(r, 1_000)) }
    }
  })()
  for (const end = Date.now() + 10_000; status.at(-1) !== true; await new Promise(r => setTimeout(r, 20))) if (Date.now() > end) throw new Error('never connected')

  const driver = new CallbackDriver({ baseUrl: api.url, mode: 'none' }) // no per-call flush: records group-commit as in production
  const CALLS = 10_000
  let next = 0
  const failed: number[] = []
  await Promise.all(Array.from({ length: 16 }, async () => {
    while (next < CALLS) {
      const n = next++
      if (n === 7_000) proxy.down()
      if (n === 8_000) proxy.up()
      const r = await driver.voice({ from: api.phone(1), to: s.proxyNumber, callSid: `sdk-flow-${n}` })
      if (r.status !== 200) failed.push(r.status)
      await r.text()
    }
  }))
  await api.svc.flushRecords()
  for (const end = Date.now() + 60_000; ids.length < CALLS && Date.now() < end;) await new Promise(r => setTimeout(r, 100))
  await new Promise(r => setTimeout(r, 1_500)) // nothing more may come (the live hold is 1 s)
  t.same(failed, [], 'every call routed')
  t.ok(stalled, 'the consumer stalled')
  t.ok(status.includes(false) && status.at(-1) === true, `it dropped and came back (${status.join(',')})`)
  t.equal(ids.length, CALLS, `${CALLS} events`)
  t.equal(new Set(ids).size, ids.length, '0 duplicated')
  t.ok(ids.every((id, i) => i === 0 || ids[i - 1]! < id), 'in id order')
})
