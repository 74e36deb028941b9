// `npm run bench -- --profile`: where the service's CPU time goes during each loaded run. The
// service runs with `--cpu-prof` (V8's sampling profiler, written when it exits); each loaded run
// records its window on the monotonic clock, which V8's sample timestamps share with
// process.hrtime on Linux, so one profile per boot is cut into one summary per run: self time by
// function and by part (our code per directory, each dependency, node internals, GC, idle).
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'

interface CallFrame { functionName: string; url: string; lineNumber: number }
interface ProfileNode { id: number; callFrame: CallFrame; children?: number[] }
interface CpuProfile { nodes: ProfileNode[]; startTime: number; endTime: number; samples: number[]; timeDeltas: number[] }

export interface ProfileWindow {
  /** Figure prefix of the run, e.g. `voice.none`. */
  name: string
  /** process.hrtime in µs. */
  startUs: number
  endUs: number
}

export interface Share { what: string; ms: number; share: number }

export interface WindowSummary {
  name: string
  sampledMs: number
  /** Busy = not idle: what the service's one thread spent working. */
  busyShare: number
  parts: Share[]
  functions: Share[]
}

/** µs on the same clock as V8's profile timestamps. */
export const monotonicUs = (): number => Number(process.hrtime.bigint() / 1000n)

/** The newest `.cpuprofile` in a directory (one per process exit). */
export function profileIn(dir: string): string | undefined {
  let files: string[]
  try { files = readdirSync(dir).filter(f => f.endsWith('.cpuprofile')).sort() } catch { return undefined }
  const last = files.at(-1)
  return last ? join(dir, last) : undefined
}

/** Which part of the process a frame belongs to: `ours: gateway/…`, a package name, or a V8 bucket. */
export function partOf(f: CallFrame): string {
  const { url, functionName } = f
  if (!url) {
    if (functionName === '(idle)') return '(idle)'
    if (functionName === '(garbage collector)') return '(garbage collector)'
    if (functionName === '(program)') return '(program: native, uWS, crypto)'
    return '(native)'
  }
  const nm = url.lastIndexOf('/node_modules/')
  if (nm !== -1) {
    const rest = url.slice(nm + 14).split('/')
    return rest[0]!.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]!
  }
  if (url.startsWith('node:')) return 'node internals'
  const m = /\/dist\/(engine|gateway|api|sql)\/(?:([^/]+)\/)?/.exec(url) ?? /\/(engine|gateway|api|sql)\/(?:([^/]+)\/)?[^/]+\.[jt]s$/.exec(url)
  if (m) return `ours: ${m[1]}${m[2] && !m[2].includes('.') ? `/${m[2]}` : ''}`
  return 'other'
}

function where(f: CallFrame): string {
  const file = f.url.replace(/^.*\/node_modules\//, '').replace(/^.*\/dist\//, '').replace(/^file:\/\//, '')
  return `${f.functionName || '(anonymous)'} ${file ? `${file}:${f.lineNumber + 1}` : ''}`.trim()
}

function top(m: Map<string, number>, busyUs: number, n: number): Share[] {
  return [...m.entries()].sort((a, b) => b[1] - a[1]).slice(0, n)
    .map(([what, us]) => ({ what, ms: us / 1000, share: busyUs > 0 ? us / busyUs : 0 }))
}

/** Self time per part and per function inside each window. Shares are of busy (non-idle) time. */
export function summarizeProfile(file: string, windows: readonly ProfileWindow[], topN = 15): WindowSummary[] {
  const p = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile
  const byId = new Map(p.nodes.map(n => [n.id, n]))
  return windows.map(w => {
    const parts = new Map<string, number>()
    const fns = new Map<string, number>()
    let t = p.startTime
    let sampled = 0
    let idle = 0
    for (let i = 0; i < p.samples.length; i++) {
      t += p.timeDeltas[i]!
      // A sample's weight is the gap to the next one (the time it stood for).
      const dt = (p.timeDeltas[i + 1] ?? 0)
      if (t < w.startUs || t >= w.endUs || dt <= 0) continue
      const node = byId.get(p.samples[i]!)
      if (!node) continue
      sampled += dt
      const part = partOf(node.callFrame)
      if (part === '(idle)') { idle += dt; continue }
      parts.set(part, (parts.get(part) ?? 0) + dt)
      const fn = where(node.callFrame)
      fns.set(fn, (fns.get(fn) ?? 0) + dt)
    }
    const busy = sampled - idle
    return { name: w.name, sampledMs: sampled / 1000, busyShare: sampled > 0 ? busy / sampled : 0, parts: top(parts, busy, topN), functions: top(fns, busy, topN) }
  })
}

const pct = (x: number) => `${(x * 100).toFixed(1)} %`

/** Markdown for the report: per run, the parts and the hottest functions. */
export function profileMarkdown(s: WindowSummary, profileFile: string): string[] {
  return [
    `### ${s.name}`,
    '',
    `${Math.round(s.sampledMs)} ms sampled, busy ${pct(s.busyShare)} of it (profile \`${profileFile}\`, open it in Chrome DevTools). Shares are of busy time.`,
    '',
    '| part | self ms | share |',
    '|---|---:|---:|',
    ...s.parts.map(x => `| ${x.what} | ${Math.round(x.ms)} | ${pct(x.share)} |`),
    '',
    '| function | self ms | share |',
    '|---|---:|---:|',
    ...s.functions.map(x => `| \`${x.what.replaceAll('|', '\\|')}\` | ${Math.round(x.ms)} | ${pct(x.share)} |`),
    '',
  ]
}
