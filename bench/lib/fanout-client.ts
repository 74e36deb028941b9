// Scenario 7's client side when no C compiler builds bench/lib/fanout-reader.c (which replaced it:
// one Node process spends ~10 µs per socket read, so the last of 1,000 sockets measured mostly
// this reader): `sockets` WebSocket connections of one tenant on /v1/stream, and
// target swaps (PATCH /v1/sessions/:id/target) at a steady rate from the same process, so send
// and receive times share one clock. Latency = swap sent → `session.target_swapped` received, on
// every socket. Uses the minimal RFC 6455 client of the stream tests.
//
//   node --import tsx bench/lib/fanout-client.ts '{"url":…,"token":…,"sockets":1000,"sessionIds":[…],"rate":50,"seconds":10}'
// Prints `connected N`, then `FANJSON {...}`.
import { monitorEventLoopDelay } from 'node:perf_hooks'
import { connectWs, type WsClient } from '../../test/support/ws-client.js'
import { freshNumber } from './requests.js'

interface Args { url: string; token: string; sockets: number; sessionIds: string[]; rate: number; seconds: number; numberOffset: number }
const a = JSON.parse(process.argv[2] ?? '{}') as Args

const sentAt = new Map<string, number>()
const latencies: number[] = []
/** Per swap: its first and its last frame (the spread is this process reading 1,000 sockets). */
const firstLast = new Map<string, { first: number; last: number }>()
let delivered = 0
const clients: WsClient[] = []
const ID_RE = /"sessionId":"([0-9a-f-]{36})"/

for (let i = 0; i < a.sockets; i += 50) {
  const batch = await Promise.all(Array.from({ length: Math.min(50, a.sockets - i) }, () =>
    connectWs(`${a.url}/v1/stream`, { headers: { authorization: `Bearer ${a.token}` }, keepMessages: false })))
  for (const c of batch) {
    c.onMessage = text => {
      if (!text.includes('session.target_swapped')) return
      const id = ID_RE.exec(text)?.[1]
      const at = id === undefined ? undefined : sentAt.get(id)
      if (at === undefined) return
      const ms = performance.now() - at
      latencies.push(ms)
      const fl = firstLast.get(id!)
      if (fl === undefined) firstLast.set(id!, { first: ms, last: ms })
      else fl.last = ms
      delivered++
    }
    clients.push(c)
  }
}
console.log(`connected ${clients.length}`)

// If this process falls behind reading, its own delay ends up in the latencies: measure it.
const lag = monitorEventLoopDelay({ resolution: 5 })
lag.enable()
let ok = 0
let failed = 0
const answers: number[] = []
const t0 = performance.now()
const interval = 1000 / a.rate
const inflight: Promise<void>[] = []
for (let k = 0; k < a.sessionIds.length && performance.now() - t0 < a.seconds * 1000; k++) {
  const wait = t0 + k * interval - performance.now()
  if (wait > 0) await new Promise(r => setTimeout(r, wait))
  const id = a.sessionIds[k]!
  const at = performance.now()
  sentAt.set(id, at)
  inflight.push(fetch(`${a.url}/v1/sessions/${id}/target`, {
    method: 'PATCH',
    headers: { authorization: `Bearer ${a.token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ customerPhone: freshNumber(707, a.numberOffset + k) }),
  }).then(async res => {
    await res.arrayBuffer()
    answers.push(performance.now() - at)
    if (res.status === 200) ok++
    else failed++
  }, () => { failed++ }))
}
await Promise.all(inflight)
const expected = ok * clients.length
const settle = performance.now()
while (delivered < expected && performance.now() - settle < 5_000) await new Promise(r => setTimeout(r, 20))
lag.disable()
for (const c of clients) c.socket.destroy()
latencies.sort((x, y) => x - y)
answers.sort((x, y) => x - y)
const firsts = [...firstLast.values()].map(v => v.first).sort((x, y) => x - y)
const spreads = [...firstLast.values()].map(v => v.last - v.first).sort((x, y) => x - y)
const q = (s: number[], p: number) => s[Math.min(s.length - 1, Math.floor(p * s.length))] ?? Number.NaN
console.log('FANJSON ' + JSON.stringify({
  sockets: clients.length, swaps: ok + failed, swapsOk: ok, expected, delivered,
  latencyMs: { p50: q(latencies, 0.5), p90: q(latencies, 0.9), p99: q(latencies, 0.99), p999: q(latencies, 0.999) },
  swapAnswerMs: { p50: q(answers, 0.5), p99: q(answers, 0.99) },
  firstFrameMs: { p50: q(firsts, 0.5), p99: q(firsts, 0.99) },
  spreadMs: { p50: q(spreads, 0.5), p99: q(spreads, 0.99) },
  clientLagMs: { p99: lag.percentile(99) / 1e6, max: lag.max / 1e6 },
}))
process.exit(0)
