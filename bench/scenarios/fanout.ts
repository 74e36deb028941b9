// Scenario 7: event fan-out. 1,000 WebSocket clients of one tenant on /v1/stream; target swaps of
// that tenant's sessions at a steady rate; latency from the PATCH being sent to each socket
// receiving `session.target_swapped` (bench/lib/fanout-reader.c on the load core, or
// bench/lib/fanout-client.ts without a C compiler), and the machine's floor under it: one thread
// writing a frame to 1,000 loopback sockets (bench/lib/loopback-floor.c). Then the stream's
// ceiling: events per second fanned out to 1,000 sockets (bench/fanout.bench.ts).
import { spawnSync } from 'node:child_process'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { runChild } from '../lib/proc.js'
import { sessionIdOf, tenantOfSession } from '../lib/population.js'
import { freshNumber } from '../lib/requests.js'
import { progress } from '../lib/results.js'
import type { Ctx } from './common.js'
import type { Service } from './service.js'

interface FanResult {
  sockets: number; swaps: number; swapsOk: number; expected: number; delivered: number
  latencyMs: { p50: number; p90: number; p99: number; p999: number }
  swapAnswerMs: { p50: number; p99: number }
  firstFrameMs: { p50: number; p99: number }
  spreadMs: { p50: number; p99: number }
  clientLagMs: { p99: number; max: number }
}

export async function fanoutScenario(ctx: Ctx, svc: Service, tokens: readonly string[]): Promise<void> {
  const sockets = ctx.opts.smoke ? 100 : 1_000
  // A latency measurement, not a throughput one: 10 swaps/s is 10,000 messages/s to the clients,
  // which one client process reads without becoming the bottleneck itself.
  const rate = 10
  const want = Math.ceil(rate * ctx.opts.duration * 1.1) + 5
  const warm = Math.round(rate * ctx.opts.warmup)
  const sessionIds: string[] = []
  for (let i = 0; i < ctx.pop.sessions && sessionIds.length < want + warm; i++) if (tenantOfSession(i, ctx.pop) === 0) sessionIds.push(sessionIdOf(i))
  const warmIds = sessionIds.splice(want)
  const numberOffset = svc.port * 1_000
  // Warm-up, as every loaded step has: the first swaps after a boot prepare and plan the swap's
  // statement on a pool connection (12-15 ms for the first one here), a cost paid once per
  // connection, not per swap. Without it, 100 swaps' p99 was that first swap's.
  if (warm > 0) {
    progress(`fan-out: warm-up, ${warm} target swaps at ${rate}/s`)
    for (let k = 0; k < warmIds.length; k++) {
      const at = Date.now()
      const res = await fetch(`${svc.url}/v1/sessions/${warmIds[k]}/target`, {
        method: 'PATCH', headers: { authorization: `Bearer ${tokens[0]}`, 'content-type': 'application/json' },
        body: JSON.stringify({ customerPhone: freshNumber(707, numberOffset + want + k) }),
      })
      await res.arrayBuffer()
      if (res.status !== 200) throw new Error(`fan-out warm-up: a target swap was answered ${res.status}`)
      await new Promise(r => setTimeout(r, Math.max(0, at + 1000 / rate - Date.now())))
    }
  }
  const reader = fanoutReader()
  progress(`fan-out: ${sockets} WebSocket clients of tenant 0, ${rate} target swaps/s for ${ctx.opts.duration} s, ` +
    (reader ? 'read by bench/lib/fanout-reader.c' : `read by bench/lib/fanout-client.ts (${whyNoReader})`))
  const url = new URL(svc.url)
  const lines = reader
    ? await runChild({
      name: 'fan-out reader', cmd: reader, core: ctx.pin.loadCore, pin: ctx.pin,
      args: [url.hostname, url.port, tokens[0]!, String(sockets), String(rate), String(ctx.opts.duration)],
    }, (ctx.opts.duration + 120) * 1000, sessionIds.map((id, k) => `${id} ${freshNumber(707, numberOffset + k)}\n`).join(''))
    : await runChild({
      name: 'fan-out client', cmd: process.execPath, core: ctx.pin.loadCore, pin: ctx.pin,
      args: ['--import', 'tsx', fileURLToPath(new URL('../lib/fanout-client.ts', import.meta.url)), JSON.stringify({
        url: svc.url, token: tokens[0], sockets, sessionIds, rate, seconds: ctx.opts.duration, numberOffset,
      })],
    }, (ctx.opts.duration + 120) * 1000)
  const j = JSON.parse(lines.find(l => l.startsWith('FANJSON '))!.slice(8)) as FanResult
  const r = ctx.results
  r.figure('fanout.sockets', j.sockets, 'count')
  r.figure('fanout.swaps', j.swapsOk, 'count')
  r.figure('fanout.swap_to_ws.p50', j.latencyMs.p50 * 1000, 'us')
  r.figure('fanout.swap_to_ws.p99', j.latencyMs.p99 * 1000, 'us')
  r.figure('fanout.delivered_share', j.expected ? j.delivered / j.expected : 0, 'ratio')
  r.figure('fanout.swap_answer.p50', j.swapAnswerMs.p50 * 1000, 'us')
  r.figure('fanout.swap_answer.p99', j.swapAnswerMs.p99 * 1000, 'us')
  // Where swap → frame goes: the first socket's frame (the service's part) and first → last frame
  // of the same swap (mostly this one client process reading 1,000 sockets in turn).
  r.figure('fanout.first_frame.p50', j.firstFrameMs.p50 * 1000, 'us')
  r.figure('fanout.first_frame.p99', j.firstFrameMs.p99 * 1000, 'us')
  r.figure('fanout.first_to_last.p50', j.spreadMs.p50 * 1000, 'us')
  r.figure('fanout.first_to_last.p99', j.spreadMs.p99 * 1000, 'us')
  const floor = await loopbackFloor(ctx, sockets)
  if (floor !== null) r.figure('fanout.loopback_floor', floor, 'us')
  r.latency({ label: `target swap → WebSocket (${j.sockets} sockets)`, p50: j.latencyMs.p50 * 1000, p90: j.latencyMs.p90 * 1000, p99: j.latencyMs.p99 * 1000, p999: j.latencyMs.p999 * 1000 })
  if (j.clientLagMs.p99 > 10) {
    r.note(`fanout: the client process itself lagged (event-loop delay p99 ${j.clientLagMs.p99.toFixed(1)} ms, max ${j.clientLagMs.max.toFixed(1)} ms): ` +
      'part of the latency is the reader, not the service')
  }
  if (j.swapsOk < j.swaps) r.note(`fanout: ${j.swaps - j.swapsOk} of ${j.swaps} target swaps were not answered 200`)
  r.target('7. event fan-out', `every target swap reaches all ${j.sockets} WebSocket clients`,
    j.expected > 0 ? j.delivered === j.expected : null, `${j.delivered} of ${j.expected} messages`)
  // Judged over the same run's loopback floor (one thread writing a frame to each socket): what is
  // left above it is the service's own share of the tail.
  const over = floor === null || j.expected === 0 ? null : j.latencyMs.p99 * 1000 - floor
  r.target('7. event fan-out', `swap → WebSocket frame p99 ≤ the loopback floor + 5 ms at ${j.sockets} clients`,
    over === null ? null : over <= 5_000,
    over === null ? 'the loopback floor or the swaps were not measured' : `p99 ${j.latencyMs.p99.toFixed(1)} ms, the loopback floor ${(floor! / 1000).toFixed(1)} ms: +${(over / 1000).toFixed(1)} ms`)
}

let whyNoReader = ''
const built = new Map<string, string | null>()

/** bench/lib/<name>.c built with the machine's cc (once per run); null without one. */
function cProgram(name: string): string | null {
  if (built.has(name)) return built.get(name)!
  const out = join(mkdtempSync(join(tmpdir(), 'maskline-fanout-')), name)
  const r = spawnSync('cc', ['-O2', '-o', out, fileURLToPath(new URL(`../lib/${name}.c`, import.meta.url))], { encoding: 'utf8' })
  if (r.status !== 0) whyNoReader = r.error ? `no C compiler: ${r.error.message}` : `cc failed: ${(r.stderr ?? '').split('\n')[0]}`
  built.set(name, r.status === 0 ? out : null)
  return built.get(name)!
}

/**
 * The C reader (bench/lib/fanout-reader.c: one epoll loop, ~2 µs per socket read, where one Node
 * process spent ~10 µs and so measured itself); null without a C compiler.
 */
const fanoutReader = () => cProgram('fanout-reader')

/**
 * The machine's floor under the figure (bench/lib/loopback-floor.c): one thread writing a frame
 * to each of `sockets` loopback sockets, pinned like the service. Median of 7 rounds, µs.
 */
async function loopbackFloor(ctx: Ctx, sockets: number): Promise<number | null> {
  const bin = cProgram('loopback-floor')
  if (!bin) return null
  const lines = await runChild({ name: 'loopback floor', cmd: bin, core: ctx.pin.serverCore, pin: ctx.pin, args: [String(sockets), '7'] }, 60_000)
  const j = JSON.parse(lines.find(l => l.startsWith('FLOORJSON '))!.slice(10)) as { writeUs: number[] }
  const sorted = [...j.writeUs].sort((x, y) => x - y)
  return sorted[Math.floor(sorted.length / 2)]!
}

/**
 * Events per second the stream module fans out to 1,000 sockets, against a loop of ws.send() in
 * the same run (bench/fanout.bench.ts: its server and its clients need both cores, so unpinned).
 */
export async function fanoutThroughput(ctx: Ctx): Promise<void> {
  progress('fan-out ceiling: bench/fanout.bench.ts (events/s to 1,000 sockets vs a ws.send() loop)')
  const lines = await runChild({
    name: 'fanout.bench', cmd: process.execPath, core: null, pin: ctx.pin,
    args: ['--import', 'tsx', fileURLToPath(new URL('../fanout.bench.ts', import.meta.url)), ...(ctx.opts.smoke ? ['--smoke'] : [])],
  }, 600_000)
  const r = ctx.results
  for (const l of lines) {
    const m = /^bench: (\S+) ([\d.]+) (.+)$/.exec(l)
    // Its publish→receive percentiles are the module's own (no HTTP); the suite's latency
    // figures are the swap→WebSocket ones above.
    if (m && /per_s$/.test(m[1]!)) r.figure(`stream.${m[1]!}`, Number(m[2]), m[3]!)
  }
  r.ratio('stream.fanout.vs_loop_send', 'stream.fanout.events_per_s', 'stream.fanout.baseline_loop_send.events_per_s')
}
