// The human side of a run: bench/results/latest.md (machine, command, targets met or not, every
// figure, the latency chart inline) and the "## Bench suite" section of bench/RESULTS.md, whose
// other sections belong to other benches and are kept as they are.
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import type { Machine } from './machine.js'
import { formatValue, type Results, type TargetResult } from './results.js'
import { formatMicros, latencyChart } from './svg-chart.js'
import { droppedTargets, previousVerdict, type TargetRun } from './target-history.js'

export interface RunInfo {
  date: string
  command: string
  machine: Machine
  revision: string
  loadGenerator: string
  pinning: string
  database: string
  redis: string
  population: string
  load: string
  /** How the service ran (compiled entry or sources). */
  service: string
  /** 1-minute load average at the start and the end: the machine may be shared. */
  loadAverage: string
  durationS: number
}

const mark = (t: TargetResult) => (t.met === null ? '➖ not measured' : t.met ? '✅ met' : '❌ not met')

function header(info: RunInfo): string[] {
  const m = info.machine
  return [
    `- Date: ${info.date}`,
    `- Command: \`${info.command}\``,
    `- Machine: ${m.cpuModel}, ${m.cores} cores, ${m.memoryGiB} GiB, ${m.platform}${m.kernel ? ` (Linux ${m.kernel})` : ''}`,
    `- Node: ${m.node}; revision ${info.revision}`,
    `- Load generator: ${info.loadGenerator}`,
    `- Pinning: ${info.pinning}`,
    `- Service: ${info.service}`,
    `- Database: ${info.database}; Redis: ${info.redis}`,
    `- Population: ${info.population}`,
    `- Load: ${info.load}`,
    `- Whole run: ${Math.round(info.durationS)} s; 1-minute load average ${info.loadAverage}`,
  ]
}

/** This run's targets, each with the previous full run's verdict where it differed, then the previous run's targets not measured now. */
function targetLines(r: Results, previous: TargetRun | null): string[] {
  const sorted = [...r.targets, ...droppedTargets(r.targets, previous)].sort((a, b) => a.scenario.localeCompare(b.scenario, 'en', { numeric: true }))
  return sorted.length ? sorted.map(t => `- ${mark(t)} — ${t.scenario}: ${t.text} (${t.detail}${previousVerdict(t, previous)})`) : ['- no target was measured in this run']
}

function figureTable(r: Results): string[] {
  return ['| figure | value | unit |', '|---|---:|---|', ...r.figures.map(f => `| \`${f.name}\` | ${formatValue(f.value)} | ${f.unit} |`)]
}

function latencyTable(r: Results): string[] {
  return ['| run | p50 | p90 | p99 | p99.9 |', '|---|---:|---:|---:|---:|',
    ...r.latencies.map(l => `| ${l.label} | ${formatMicros(l.p50)} | ${formatMicros(l.p90)} | ${formatMicros(l.p99)} | ${formatMicros(l.p999)} |`)]
}

export function writeLatest(path: string, info: RunInfo, r: Results, jsonlName: string, previous: TargetRun | null = null): string {
  const svg = latencyChart(r.latencies)
  const lines = [
    `# maskline bench: ${info.date}`,
    '',
    'How close maskline gets to what this machine can do: every ratio is against a baseline measured',
    'in the same run (bare uWS, fastify, an Ed25519 verify loop, an INSERT loop, the record ceiling), because machines are noisy.',
    '',
    ...header(info),
    `- Raw results: \`bench/results/${jsonlName}\` (JSON lines)`,
    '',
    '## Targets',
    '',
    ...targetLines(r, previous),
    '',
    '## Latency percentiles',
    '',
    svg,
    '',
    ...latencyTable(r),
    '',
    '## Figures',
    '',
    ...figureTable(r),
    '',
  ]
  if (r.skips.length) lines.push('## Skipped', '', ...r.skips.map(s => `- ${s.step}: ${s.reason}`), '')
  if (r.notes.length) lines.push('## Notes', '', ...r.notes.map(n => `- ${n}`), '')
  if (r.profiles.length) lines.push('## Profiles (--profile)', '', ...r.profiles)
  writeFileSync(path, lines.join('\n'))
  return svg
}

export const SECTION = '## Bench suite'

/** What the ratios of the section are against (kept in the section across runs). */
const BASELINES = 'Ratios are against baselines measured in the same run: uWS hello (the HTTP ceiling), the uWS callback ' +
  '(form parse + `Map.get` + TeXML), the same callback on fastify, an Ed25519 verify loop on one core, a single-row INSERT loop ' +
  'with 8 connections, and the record ceiling (the uWS callback plus its call row and `call.incoming` outbox row through raw ' +
  '`pg` in 10 ms group commits; "Record ceiling" below).'

/** Replaces (or appends) the "## Bench suite" section; every other section is left untouched. */
export function updateResultsSection(path: string, info: RunInfo, r: Results, previous: TargetRun | null = null): void {
  const body = [
    SECTION,
    '',
    `Written by \`npm run bench\` (bench/run.ts); the full report with the latency chart is bench/results/latest.md.`,
    '',
    BASELINES,
    '',
    ...header(info),
    '',
    '### Targets',
    '',
    ...targetLines(r, previous),
    '',
    '### Latency',
    '',
    ...latencyTable(r),
    '',
    '### Figures',
    '',
    ...figureTable(r),
    '',
    ...(r.skips.length ? ['### Skipped', '', ...r.skips.map(s => `- ${s.step}: ${s.reason}`), ''] : []),
  ].join('\n')
  const text = existsSync(path) ? readFileSync(path, 'utf8') : '# Bench results\n'
  const lines = text.split('\n')
  const start = lines.findIndex(l => l.trim() === SECTION)
  let next: string
  if (start === -1) {
    next = text.replace(/\n*$/, '\n\n') + body
  } else {
    let end = lines.findIndex((l, k) => k > start && /^## /.test(l))
    if (end === -1) end = lines.length
    next = [...lines.slice(0, start), ...body.split('\n'), ...lines.slice(end)].join('\n')
  }
  writeFileSync(path, next.replace(/\n*$/, '\n'))
}
