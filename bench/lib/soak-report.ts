// The soak's per-minute table and its judgement (bench/scenarios/soak.ts says what is judged).
import type { Ctx } from '../scenarios/common.js'
import { callbackP99Ms, percentile, type NodeSample } from './soak-sample.js'
import type { Sample } from './soak-load.js'

/** A restart: from its start until its effects are over. */
export interface Window { what: string; from: number; to: number }

export interface MinuteRow {
  minute: number
  node: Array<{ rssMiB: number; heapLowMiB: number; loopP99Ms: number; callbackP99Ms: number; outbox: number; journalKiB: number; sockets: number; streamClients: number }>
  poolConns: number
  voiceP99Ms: number
  restP99Ms: number
  requests: number
  fiveXx: number
  restart: string
}

export interface Table { rows: MinuteRow[]; markdown: string[] }

const inWindow = (at: number, ws: readonly Window[]) => ws.some(w => at >= w.from && at <= w.to)
const mib = (b: number) => b / 2 ** 20
const REST: ReadonlySet<string> = new Set(['read', 'create', 'swap', 'end', 'token'])
const failed = (s: Sample) => s.status >= 500 || s.status === 0

export function minuteTable(minutes: number, started: number, nodes: ReadonlyArray<ReadonlyArray<NodeSample | null>>, pool: ReadonlyArray<{ at: number; conns: number }>, load: readonly Sample[], windows: readonly Window[]): Table {
  const rows: MinuteRow[] = []
  for (let m = 1; m <= minutes; m++) {
    const from = started + (m - 1) * 60_000
    const to = from + 60_000
    const inMin = <T extends { at: number }>(xs: ReadonlyArray<T | null>) => xs.filter((x): x is T => x !== null && x.at > from && x.at <= to)
    const reqs = load.filter(s => s.at > from && s.at <= to)
    const clean = reqs.filter(s => !inWindow(s.at, windows) && !failed(s))
    rows.push({
      minute: m,
      node: nodes.map(ns => {
        const xs = inMin(ns)
        const prev = ns.filter((x): x is NodeSample => x !== null && x.at <= from).at(-1) ?? xs[0]
        const last = xs.at(-1)
        return {
          rssMiB: last ? mib(last.rssBytes) : Number.NaN,
          heapLowMiB: xs.length ? mib(Math.min(...xs.map(x => x.heapUsedBytes))) : Number.NaN,
          loopP99Ms: xs.length ? Math.max(...xs.map(x => x.loopP99Ms)) : Number.NaN,
          callbackP99Ms: prev && last && prev !== last ? callbackP99Ms(prev, last) : Number.NaN,
          outbox: xs.length ? Math.max(...xs.map(x => x.outboxBacklog)) : Number.NaN,
          journalKiB: last ? last.journalBytes / 1024 : Number.NaN,
          sockets: last ? last.sockets : Number.NaN,
          streamClients: last ? last.streamClients : Number.NaN,
        }
      }),
      poolConns: inMin(pool).at(-1)?.conns ?? Number.NaN,
      voiceP99Ms: percentile(clean.filter(s => s.kind === 'voice').map(s => s.ms), 99),
      restP99Ms: percentile(clean.filter(s => REST.has(s.kind)).map(s => s.ms), 99),
      requests: reqs.length,
      fiveXx: reqs.filter(failed).length,
      restart: windows.filter(w => w.from < to && w.to > from).map(w => w.what).join(', '),
    })
  }
  const f = (x: number, d = 1) => Number.isFinite(x) ? x.toFixed(d) : '–'
  const markdown = [
    '| min | RSS MiB (1 / 2) | heap low MiB | loop p99 ms | callback p99 ms (in process) | outbox | journal KiB | sockets | stream clients | pg conns | voice p99 ms | REST p99 ms | requests | 5xx | restart |',
    '|---:|---|---|---|---|---|---|---|---|---:|---:|---:|---:|---:|---|',
    ...rows.map(r => `| ${r.minute} | ${r.node.map(n => f(n.rssMiB)).join(' / ')} | ${r.node.map(n => f(n.heapLowMiB)).join(' / ')} | ${r.node.map(n => f(n.loopP99Ms)).join(' / ')} | ` +
      `${r.node.map(n => f(n.callbackP99Ms, 2)).join(' / ')} | ${r.node.map(n => f(n.outbox, 0)).join(' / ')} | ${r.node.map(n => f(n.journalKiB, 0)).join(' / ')} | ` +
      `${r.node.map(n => f(n.sockets, 0)).join(' / ')} | ${r.node.map(n => f(n.streamClients, 0)).join(' / ')} | ${f(r.poolConns, 0)} | ${f(r.voiceP99Ms)} | ${f(r.restP99Ms)} | ${r.requests} | ${r.fiveXx} | ${r.restart} |`),
  ]
  return { rows, markdown }
}

export interface Lost { calls: number; answeredCalls: number; sms: number; answeredSms: number; undelivered: number; events: number; unframed: number; streamed: number }

/** The longest time window of docs/memory-bounds.md (the record writer's call cache, the grace period), in minutes. */
export const LONGEST_WINDOW_MIN = 15

/** Judges the run; returns the targets about lost work and errors that were not met (a CI run fails on them). */
/** The client p99 (ms) of voice fetches or of REST requests in minutes lo..hi of the run. */
function clientP99(clean: readonly Sample[], kind: 'voice' | 'rest', lo: number, hi: number, minuteOf: (s: Sample) => number): number {
  const ofKind = (s: Sample) => (kind === 'voice' ? s.kind === 'voice' : !['voice', 'callback', 'sms', 'stream'].includes(s.kind))
  return percentile(clean.filter(s => ofKind(s) && minuteOf(s) >= lo && minuteOf(s) <= hi).map(s => s.ms), 99)
}

/** From this length on, the plateau is judged over ten-minute windows as well. */
const HOUR_RUN_MIN = 60

/**
 * An hour's run (or longer): each node's mean RSS and heap low point over the last 10 minutes
 * within 10 % of minutes 20-30 (the time windows, 15 min at most, are full by then), and the
 * client p99s of the last 10 minutes within 20 % of minutes 5-15 (outside the restarts' windows).
 */
function judgeHour(ctx: Ctx, o: { minutes: number; table: Table }, clean: readonly Sample[], minuteOf: (s: Sample) => number): void {
  const r = ctx.results
  const rows = o.table.rows
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length
  const between = (lo: number, hi: number) => rows.filter(x => x.minute >= lo && x.minute <= hi)
  const [mid, end] = [between(20, 30), between(o.minutes - 9, o.minutes)]
  for (const [i, name] of ['node1', 'node2'].entries()) {
    const rss = mean(end.map(x => x.node[i]!.rssMiB)) / mean(mid.map(x => x.node[i]!.rssMiB))
    const heap = mean(end.map(x => x.node[i]!.heapLowMiB)) / mean(mid.map(x => x.node[i]!.heapLowMiB))
    r.figure(`soak.${name}.rss_last10_vs_20_30`, rss, 'ratio')
    r.figure(`soak.${name}.heap_last10_vs_20_30`, heap, 'ratio')
    r.target('soak', `${name}: mean RSS and heap low point of the last 10 min within 10 % of minutes 20-30`, rss <= 1.1 && heap <= 1.1, `RSS ×${rss.toFixed(3)}, heap low ×${heap.toFixed(3)}`)
  }
  for (const kind of ['voice', 'rest'] as const) {
    const of = (lo: number, hi: number) => clientP99(clean, kind, lo, hi, minuteOf)
    const a = of(5, 15)
    const b = of(o.minutes - 9, o.minutes)
    r.figure(`soak.${kind}.p99_min5_15`, a, 'ms')
    r.figure(`soak.${kind}.p99_last10`, b, 'ms')
    r.target('soak', `${kind} p99 of the last 10 min within 20 % of minutes 5-15 (outside restarts)`, b <= a * 1.2, `${a.toFixed(1)} → ${b.toFixed(1)} ms`)
  }
}

export function judgeSoak(ctx: Ctx, o: { minutes: number; started: number; table: Table; windows: readonly Window[]; samples: readonly Sample[]; errors: readonly string[]; lost: Lost }): string[] {
  const r = ctx.results
  const S = 'soak'
  const rows = o.table.rows
  // Warm-up: until every time window has filled (LONGEST_WINDOW_MIN + 1) in a run long enough to
  // show the plateau after it; in a shorter one, the first 2 minutes (a third of a shorter run),
  // and memory is reported, not judged. Compared: the first minute after warm-up and the last;
  // p99s over the first and last 5 minutes after it (halves when shorter).
  const long = o.minutes >= 2 * (LONGEST_WINDOW_MIN + 1)
  const warm = long ? LONGEST_WINDOW_MIN + 1 : Math.min(2, Math.floor(o.minutes / 3))
  const after = rows.slice(warm)
  const first = after[0]
  const last = rows.at(-1)
  for (const [i, name] of ['node1', 'node2'].entries()) {
    if (!first || !last || first === last) { r.target(S, `${name}: RSS and heap flat after warm-up`, null, 'run too short'); continue }
    const rss = last.node[i]!.rssMiB / first.node[i]!.rssMiB
    const heap = last.node[i]!.heapLowMiB / first.node[i]!.heapLowMiB
    r.figure(`soak.${name}.rss_last_mib`, last.node[i]!.rssMiB, 'MiB')
    r.figure(`soak.${name}.rss_growth`, rss, 'ratio')
    r.figure(`soak.${name}.heap_growth`, heap, 'ratio')
    const detail = `RSS ${first.node[i]!.rssMiB.toFixed(1)} → ${last.node[i]!.rssMiB.toFixed(1)} MiB, heap low ${first.node[i]!.heapLowMiB.toFixed(1)} → ${last.node[i]!.heapLowMiB.toFixed(1)} MiB`
    r.target(S, `${name}: RSS and heap low point of the last minute within 10 % of minute ${warm + 1}`, long ? rss <= 1.1 && heap <= 1.1 : null,
      long ? detail : `${detail}; not judged: the windows fill for ${LONGEST_WINDOW_MIN} min (docs/memory-bounds.md), judged from --minutes ${2 * (LONGEST_WINDOW_MIN + 1)}`)
  }
  const span = Math.min(5, Math.floor(after.length / 2))
  const clean = o.samples.filter(s => !o.windows.some(w => s.at >= w.from && s.at <= w.to) && s.status > 0 && s.status < 500)
  const t0 = o.started
  const minuteOf = (s: Sample) => Math.floor((s.at - t0) / 60_000) + 1
  for (const kind of ['voice', 'rest'] as const) {
    const of = (lo: number, hi: number) => clientP99(clean, kind, lo, hi, minuteOf)
    if (span < 1) { r.target(S, `${kind} p99 of the last minutes within 20 % of the first`, null, 'run too short'); continue }
    const a = of(warm + 1, warm + span)
    const b = of(o.minutes - span + 1, o.minutes)
    r.figure(`soak.${kind}.p99_first`, a, 'ms')
    r.figure(`soak.${kind}.p99_last`, b, 'ms')
    r.target(S, `${kind} p99 of the last ${span} min within 20 % of minutes ${warm + 1}-${warm + span} (outside restarts)`, b <= a * 1.2, `${a.toFixed(1)} → ${b.toFixed(1)} ms`)
  }
  if (o.minutes >= HOUR_RUN_MIN) judgeHour(ctx, o, clean, minuteOf)
  const l = o.lost
  r.figure('soak.answered_calls', l.answeredCalls, 'count')
  r.figure('soak.answered_sms', l.answeredSms, 'count')
  r.figure('soak.events', l.events, 'count')
  const hard: string[] = []
  const must = (text: string, met: boolean, detail: string) => { r.target(S, text, met, detail); if (!met) hard.push(`${text}: ${detail}`) }
  must('every answered call and SMS has its record', l.calls === 0 && l.sms === 0, `${l.calls} of ${l.answeredCalls} calls, ${l.sms} of ${l.answeredSms} SMS without a record`)
  must('every event its webhook delivery (or a later attempt scheduled) and its frame on every steady stream client', l.undelivered === 0 && l.unframed === 0,
    `${l.undelivered} of ${l.events} events done without a delivery, ${l.unframed} of ${l.streamed} frames missing`)
  const outside = o.samples.filter(s => (s.status >= 500 || s.status === 0) && !o.windows.some(w => s.at >= w.from && s.at <= w.to))
  const inside = o.samples.filter(s => (s.status >= 500 || s.status === 0) && o.windows.some(w => s.at >= w.from && s.at <= w.to))
  r.figure('soak.requests', o.samples.length, 'count')
  r.figure('soak.5xx_in_restarts', inside.length, 'count')
  must('0 5xx (or no answer) outside the restarts\' windows', outside.length === 0,
    `${outside.length} outside (${[...new Set(outside.map(s => `${s.kind} ${s.status}`))].slice(0, 6).join(', ')}), ${inside.length} inside ${o.windows.map(w => `${w.what} ${Math.round((w.to - w.from) / 1000)} s`).join(', ')}`)
  for (const e of o.errors) r.note(`soak: ${e}`)
  return hard
}
