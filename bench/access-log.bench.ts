// Question: what does one access-log line cost the service? gateway/http/app.ts `finish()` writes
// `{ method, route, status, us }` (plus `tenantId` on authenticated routes) after every answer below
// 500 through api/log.ts `accessLineWriter` (the line pino would write, composed without pino's
// per-line work), into an asynchronous destination that writes 8 KiB at a time. The bar is
// ≤ 2 µs a line, or a documented policy.
//
// Side by side, in one process, the same loop of lines (style 8):
//   service          the line exactly as finish() writes it at LOG_LEVEL=info (the default), into
//                    the service's own stdout destination (api/log.ts createAppendDestination) on
//                    /dev/null: lines appended to an array, written joined 8 KiB at a time
//   service_tenant   the same with tenantId, as REST routes log it
//   pino             the same line through the pino logger of createLogger (the scrub formatter,
//                    then the same destination): finish() before the eighth session, and still
//                    the path of 5xx lines
//   pino_tenant      the same with tenantId
//   sonic_boom       the pino case into pino.destination (sonic-boom, sync: false, minLength
//                    8192): the service's earlier destination
//   no_scrub         the pino case without the scrub formatter: what the scrub costs
//   no_write         the pino case into a stream that drops each line: the line is built
//                    and serialized, the destination's buffering and writes are not paid
//   level_warn       the logger at LOG_LEVEL=warn: the call when the line is not written
//   counter          no line: a per-route status count and a latency histogram bucket, what
//                    "successes counted in metrics" would cost instead
//   metrics          no line: the service's own request metrics (gateway/metrics.ts
//                    RequestMetrics.observe), what every request pays on top of its line
//   stringify        JSON.stringify of the line alone (baseline: the least a JSON line can cost)
//
// The destination is /dev/null with the service's settings (8 KiB per write): the write system
// call is paid once per 8 KiB (~60 lines), as in the service.
// The loop yields to the event loop every 1,000 lines so those asynchronous writes complete, as
// they do between requests. Cost is CPU time of the whole process (user + system, every thread:
// the writes run on libuv's pool) per line; wall time is printed too.
//
//   node --expose-gc --import tsx bench/access-log.bench.ts     (LINES=200000 ROUNDS=7)
//
// Output: `bench: access_log.ns_per_line <n> ns` (the service's line) and one figure per variant.
import { openSync } from 'node:fs'
import { cpus } from 'node:os'
import { setImmediate as yieldLoop } from 'node:timers/promises'
import { pino, type DestinationStream, type Logger } from 'pino'
import { accessLineWriter, createAppendDestination, createLogger } from '../api/log.js'
import { RequestMetrics } from '../gateway/metrics.js'

const LINES = Number(process.env.LINES ?? 200_000)
const ROUNDS = Number(process.env.ROUNDS ?? 7)
const BATCH = Number(process.env.BATCH ?? 1_000)
const TENANT = '0190a000-0000-7000-8000-000000000007'
const ROUTES = ['/v1/webhooks/cpaas/voice', '/v1/webhooks/cpaas/voice/status', '/v1/webhooks/cpaas/sms', '/v1/sessions/:id']

/** The service's stdout destination (api/log.ts stdoutDestination), on /dev/null. */
const devNull = () => createAppendDestination({ fd: openSync('/dev/null', 'w') })
/** The service's earlier destination: pino.destination (sonic-boom) with the same settings. */
const sonicBoom = () => pino.destination({ dest: '/dev/null', sync: false, minLength: 8_192 })

/** The line of gateway/http/app.ts finish(), for a request that started at `start`. */
function line(k: number, start: number, tenant: boolean): Record<string, unknown> {
  const l: Record<string, unknown> = { method: 'POST', route: ROUTES[k & 3], status: 200, us: Math.round((performance.now() - start) * 1000) }
  if (tenant) l.tenantId = TENANT
  return l
}

function loggerCase(log: Logger, tenant: boolean): (k: number, start: number) => void {
  return (k, start) => log.info(line(k, start, tenant), 'request')
}

function accessCase(tenant: boolean): (k: number, start: number) => void {
  const write = accessLineWriter(createLogger({ level: 'info', destination: devNull() }))
  return (k, start) => write('POST', ROUTES[k & 3]!, 200, Math.round((performance.now() - start) * 1000), tenant ? TENANT : undefined, undefined, false)
}

// The metrics alternative: counts by route and status class, and a log2 latency histogram.
const counts = new Map<string, Uint32Array>()
const histogram = new Uint32Array(32)
function count(k: number, start: number): void {
  const route = ROUTES[k & 3]!
  let c = counts.get(route)
  if (!c) counts.set(route, c = new Uint32Array(6))
  c[2]!++ // 2xx
  const us = Math.round((performance.now() - start) * 1000)
  histogram[us > 0 ? 31 - Math.clz32(us) : 0]!++
}

const requests = new RequestMetrics(ROUTES)
let sink = 0
const cases: Array<[name: string, fn: (k: number, start: number) => void]> = [
  ['service', accessCase(false)],
  ['service_tenant', accessCase(true)],
  ['pino', loggerCase(createLogger({ level: 'info', destination: devNull() }), false)],
  ['pino_tenant', loggerCase(createLogger({ level: 'info', destination: devNull() }), true)],
  // createLogger's options minus `formatters` (the scrub).
  ['no_scrub', loggerCase(pino({
    level: 'info', base: { service: 'maskline' },
    serializers: { req: (r: { method?: unknown }) => ({ method: r?.method }), res: (r: { status?: unknown }) => ({ status: r?.status }) },
  }, devNull()), false)],
  ['no_write', loggerCase(createLogger({ level: 'info', destination: { write: () => {} } satisfies DestinationStream }), false)],
  ['sonic_boom', loggerCase(createLogger({ level: 'info', destination: sonicBoom() }), false)],
  ['level_warn', loggerCase(createLogger({ level: 'warn', destination: devNull() }), false)],
  ['counter', count],
  ['metrics', (k, start) => requests.observe(ROUTES[k & 3]!, 200, Math.round((performance.now() - start) * 1000))],
  ['stringify', (k, start) => { sink += JSON.stringify(line(k, start, false)).length }],
]

interface Sample { cpuNs: number; wallNs: number }

async function round(fn: (k: number, start: number) => void): Promise<Sample> {
  const gc = (globalThis as { gc?: () => void }).gc
  gc?.()
  await yieldLoop()
  const cpu0 = process.cpuUsage()
  const t0 = process.hrtime.bigint()
  for (let k = 0; k < LINES; k += BATCH) {
    for (let j = k; j < k + BATCH; j++) fn(j, performance.now())
    await yieldLoop() // the destination's asynchronous writes complete between requests
  }
  const wallNs = Number(process.hrtime.bigint() - t0) / LINES
  const cpu = process.cpuUsage(cpu0)
  return { cpuNs: ((cpu.user + cpu.system) * 1000) / LINES, wallNs }
}

const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)]!

console.log(`# access-log: node ${process.version}, ${cpus()[0]?.model ?? 'unknown CPU'}, ${cpus().length} cores; ${ROUNDS} rounds of ${LINES.toLocaleString('en')} lines per case, cases interleaved`)
// Warm-up: every case once, so the JIT has seen them all before any is timed.
for (const [, fn] of cases) await round(fn)
const samples = new Map<string, Sample[]>(cases.map(([n]) => [n, []]))
for (let r = 0; r < ROUNDS; r++) for (const [name, fn] of cases) samples.get(name)!.push(await round(fn))
for (const [name] of cases) {
  const s = samples.get(name)!
  const cpu = s.map(x => x.cpuNs)
  const figure = name === 'service' ? 'access_log.ns_per_line' : `access_log.${name}.ns_per_line`
  console.log(`bench: ${figure} ${Math.round(median(cpu))} ns`)
  console.log(`#   ${name}: cpu min ${Math.round(Math.min(...cpu))} max ${Math.round(Math.max(...cpu))} ns; wall median ${Math.round(median(s.map(x => x.wallNs)))} ns`)
}
if (sink < 0) console.log(sink) // keeps the stringify case from being optimised away
