// Scenario 7: event fan-out. 1,000 WebSocket clients of one tenant on /v1/stream; target swaps of
// that tenant's sessions at a steady rate; latency from the PATCH being sent to each socket
// receiving `session.target_swapped` (bench/lib/fanout-client.ts, on the load core). Then the
// stream's ceiling: events per second fanned out to 1,000 sockets (bench/fanout.bench.ts).
import { fileURLToPath } from 'node:url'
import { runChild } from '../lib/proc.js'
import { sessionIdOf, tenantOfSession } from '../lib/population.js'
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
  const sessionIds: string[] = []
  for (let i = 0; i < ctx.pop.sessions && sessionIds.length < want; i++) if (tenantOfSession(i, ctx.pop) === 0) sessionIds.push(sessionIdOf(i))
  progress(`fan-out: ${sockets} WebSocket clients of tenant 0, ${rate} target swaps/s for ${ctx.opts.duration} s`)
  const lines = await runChild({
    name: 'fan-out client', cmd: process.execPath, core: ctx.pin.loadCore, pin: ctx.pin,
    args: ['--import', 'tsx', fileURLToPath(new URL('../lib/fanout-client.ts', import.meta.url)), JSON.stringify({
      url: svc.url, token: tokens[0], sockets, sessionIds, rate, seconds: ctx.opts.duration, numberOffset: svc.port * 1_000,
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
  r.latency({ label: `target swap → WebSocket (${j.sockets} sockets)`, p50: j.latencyMs.p50 * 1000, p90: j.latencyMs.p90 * 1000, p99: j.latencyMs.p99 * 1000, p999: j.latencyMs.p999 * 1000 })
  if (j.clientLagMs.p99 > 10) {
    r.note(`fanout: the client process itself lagged (event-loop delay p99 ${j.clientLagMs.p99.toFixed(1)} ms, max ${j.clientLagMs.max.toFixed(1)} ms): ` +
      'part of the latency is the reader, not the service')
  }
  if (j.swapsOk < j.swaps) r.note(`fanout: ${j.swaps - j.swapsOk} of ${j.swaps} target swaps were not answered 200`)
  r.target('7. event fan-out', `every target swap reaches all ${j.sockets} WebSocket clients`,
    j.expected > 0 ? j.delivered === j.expected : null, `${j.delivered} of ${j.expected} messages`)
  r.target('7. event fan-out (issue #13)', `swap → WebSocket frame p99 ≤ 5 ms at ${j.sockets} clients`,
    j.expected > 0 ? j.latencyMs.p99 <= 5 : null, `p99 ${j.latencyMs.p99.toFixed(1)} ms`)
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
