// Question: how many events per second can one node fan out on the WebSocket stream to 1,000
// connected sockets of one tenant, and what is the publish→receive latency at a steady rate?
// Baseline in the same run (style 8): the same events written with a JS loop of ws.send() over
// the same number of sockets, which is what `app.publish` replaces.
//
//   node --import tsx bench/fanout.bench.ts [--smoke] [--sockets N] [--events N]
//
// The server (uWS + gateway/stream) runs on the main thread, the clients in a worker thread with
// a minimal RFC 6455 client (test/support/ws-client.ts), so the two sides do not share an event
// loop. Publish times go to the worker through a SharedArrayBuffer; latency is measured on the
// absolute clock (performance.timeOrigin + now()), common to both threads. Throughput runs
// closed-loop: the publisher keeps at most WINDOW events per socket unacknowledged, far below the
// 1 MiB backpressure limit, so no socket is dropped.
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads'
import { cpus } from 'node:os'
import uWS from 'uWebSockets.js'
import { buildEnvelope } from '../sql/vocabulary/event-envelope.js'
import { registerStream } from '../gateway/stream/stream.js'
import { connectWs, type WsClient } from '../test/support/ws-client.js'

const TENANT = '01900000-0000-7000-8000-000000000001'
const WINDOW = 200
const clock = () => performance.timeOrigin + performance.now()

interface Setup {
  port: number
  sockets: number
  throughputEvents: number
  latencyEvents: number
  times: SharedArrayBuffer // Float64Array: publish time per seq
  counters: SharedArrayBuffer // Int32Array: [received on /v1/stream, received on /raw]
}

/** An id that carries the sequence number in its last 12 hex digits: the client reads it without JSON.parse. */
function eventJson(seq: number) {
  return buildEnvelope(`01900000-0000-7000-8000-${seq.toString(16).padStart(12, '0')}`, 'call.answered', 1_767_225_600_000, {
    sessionId: '01900000-0000-7000-8000-0000000000aa', tenantId: TENANT, proxyNumber: '+12025550100',
    callId: '01900000-0000-7000-8000-0000000000bb', direction: 'A_TO_B', status: 'ANSWERED', durationSeconds: 0,
  })
}

if (isMainThread) await main()
else await worker(workerData as Setup)

async function main() {
  const args = process.argv.slice(2)
  const smoke = args.includes('--smoke')
  const arg = (name: string, dflt: number) => (args.includes(name) ? Number(args[args.indexOf(name) + 1]) : dflt)
  const sockets = arg('--sockets', smoke ? 50 : 1_000)
  const throughputEvents = arg('--events', smoke ? 500 : 5_000)
  const latencyEvents = smoke ? 200 : 300
  // Steady rate for the latency phase: ~100,000 deliveries/s, a tenth of what throughput shows,
  // so the figure is latency, not queueing (1 ms between events at 50 sockets, 10 ms at 1,000).
  const gapMs = Math.max(1, sockets / 100)
  // The loop baseline is an order of magnitude slower (a syscall per send): fewer events.
  const baselineEvents = Math.max(100, Math.round(throughputEvents / 10))
  const silent = { debug() {}, info() {}, warn() {}, error() {} }

  const app = uWS.App()
  let port: number | null = null
  const stream = registerStream(app, { verifyTenantToken: () => ({ tenantId: TENANT }), selfUrl: () => (port === null ? null : `http://127.0.0.1:${port}`), log: silent })
  // Baseline route: same settings, sockets kept in an array and written in a loop.
  const raw: Array<uWS.WebSocket<unknown>> = []
  app.ws('/raw', {
    idleTimeout: 46, sendPingsAutomatically: true, maxBackpressure: 1024 * 1024,
    closeOnBackpressureLimit: true as unknown as number,
    open: ws => { raw.push(ws) },
    close: ws => { raw.splice(raw.indexOf(ws), 1) },
  })
  const listen = await new Promise<uWS.us_listen_socket>((resolve, reject) =>
    app.listen('127.0.0.1', 0, s => (s ? resolve(s) : reject(new Error('listen failed')))))
  const boundPort = port = uWS.us_socket_local_port(listen)
  const setup: Setup = {
    port: boundPort, sockets, throughputEvents, latencyEvents,
    times: new SharedArrayBuffer(8 * (throughputEvents + latencyEvents + baselineEvents)),
    counters: new SharedArrayBuffer(8),
  }
  const times = new Float64Array(setup.times)
  const counters = new Int32Array(setup.counters)
  // Node 20 workers do not inherit the tsx loader: register it, then load this file as the worker.
  const w = new Worker(`import('tsx/esm/api').then(m => { m.register(); return import(${JSON.stringify(import.meta.url)}) })`,
    { eval: true, workerData: setup })
  const fromWorker = (want: string) => new Promise<Record<string, unknown>>((resolve, reject) => {
    const onMsg = (m: Record<string, unknown>) => { if (m.ev === want) { w.off('message', onMsg); resolve(m) } }
    w.on('message', onMsg)
    w.once('error', reject)
  })
  const tick = () => new Promise(r => setImmediate(r))
  const waitUntil = async (cond: () => boolean, what: string, ms = 120_000) => {
    const deadline = Date.now() + ms
    while (!cond()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
      await tick()
    }
  }

  await fromWorker('connected')
  await waitUntil(() => stream.connectionCount() === sockets && raw.length === sockets, 'sockets')

  // 1. Throughput through app.publish, closed loop.
  let t0 = clock()
  for (let seq = 0; seq < throughputEvents; seq++) {
    while ((seq - Atomics.load(counters, 0) / sockets) > WINDOW) await tick()
    times[seq] = clock()
    stream.publishEvent(eventJson(seq))
    if ((seq & 15) === 15) await tick()
  }
  await waitUntil(() => Atomics.load(counters, 0) >= throughputEvents * sockets, 'throughput deliveries')
  const publishSeconds = (clock() - t0) / 1000

  // 2. Latency at a steady rate, through app.publish.
  const latBase = throughputEvents
  for (let i = 0; i < latencyEvents; i++) {
    const at = clock()
    while (clock() - at < gapMs) await tick()
    times[latBase + i] = clock()
    stream.publishEvent(eventJson(latBase + i))
  }
  await waitUntil(() => Atomics.load(counters, 0) >= (throughputEvents + latencyEvents) * sockets, 'latency deliveries')
  w.postMessage({ cmd: 'latency' })
  const lat = await fromWorker('latency') as { p50: number; p99: number }

  // 3. Baseline: the same throughput run, a JS loop of ws.send() instead of app.publish.
  const baseStart = throughputEvents + latencyEvents
  t0 = clock()
  for (let i = 0; i < baselineEvents; i++) {
    while ((i - Atomics.load(counters, 1) / sockets) > WINDOW) await tick()
    const seq = baseStart + i
    times[seq] = clock()
    const json = JSON.stringify(eventJson(seq))
    for (const ws of raw) ws.send(json)
    if ((i & 15) === 15) await tick()
  }
  await waitUntil(() => Atomics.load(counters, 1) >= baselineEvents * sockets, 'baseline deliveries')
  const baselineSeconds = (clock() - t0) / 1000

  w.postMessage({ cmd: 'close' })
  await fromWorker('closed')
  await w.terminate()
  stream.closeAll()
  uWS.us_listen_socket_close(listen)

  const report = (name: string, value: number, unit: string) =>
    console.log(`bench: ${name} ${value >= 100 ? Math.round(value) : value.toFixed(1)} ${unit}`)
  console.log(`# node ${process.version}, ${cpus().length} x ${cpus()[0]?.model ?? 'cpu'}; ${sockets} sockets, ` +
    `${throughputEvents} events (throughput), ${latencyEvents} events every ${gapMs} ms (latency), ` +
    `${baselineEvents} events (loop baseline), window ${WINDOW}/socket`)
  report('fanout.events_per_s', throughputEvents / publishSeconds, 'events/s')
  report('fanout.deliveries_per_s', (throughputEvents * sockets) / publishSeconds, 'msgs/s')
  report('fanout.p50', lat.p50, 'us')
  report('fanout.p99', lat.p99, 'us')
  report('fanout.baseline_loop_send.events_per_s', baselineEvents / baselineSeconds, 'events/s')
  report('fanout.baseline_loop_send.deliveries_per_s', (baselineEvents * sockets) / baselineSeconds, 'msgs/s')
  process.exit(0)
}

async function worker(setup: Setup) {
  const times = new Float64Array(setup.times)
  const counters = new Int32Array(setup.counters)
  const latFrom = setup.throughputEvents
  const latTo = setup.throughputEvents + setup.latencyEvents
  const latencies = new Float64Array(setup.latencyEvents * setup.sockets)
  let nLat = 0
  const clients: WsClient[] = []

  async function open(path: string, counter: number) {
    for (let i = 0; i < setup.sockets; i += 50) {
      const batch = await Promise.all(Array.from({ length: Math.min(50, setup.sockets - i) }, () =>
        connectWs(`http://127.0.0.1:${setup.port}${path}`, { headers: { authorization: 'Bearer bench' }, keepMessages: false })))
      for (const c of batch) {
        c.onMessage = text => {
          const seq = parseInt(text.slice(31, 43), 16)
          if (seq >= latFrom && seq < latTo) latencies[nLat++] = (clock() - times[seq]!) * 1000
          Atomics.add(counters, counter, 1)
        }
        clients.push(c)
      }
    }
  }
  await open('/v1/stream', 0)
  await open('/raw', 1)
  parentPort!.postMessage({ ev: 'connected' })

  parentPort!.on('message', (m: { cmd: string }) => {
    if (m.cmd === 'latency') {
      const sorted = latencies.slice(0, nLat).sort()
      const q = (p: number) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? NaN
      parentPort!.postMessage({ ev: 'latency', p50: q(0.5), p99: q(0.99) })
    } else if (m.cmd === 'close') {
      for (const c of clients) c.socket.destroy()
      parentPort!.postMessage({ ev: 'closed' })
    }
  })
}
