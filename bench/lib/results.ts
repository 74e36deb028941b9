// Everything a run measured: figures (one `bench:` line each), latency distributions for the chart,
// targets of the issue with met / not met, and skips with their reason. Written as JSON lines.
import { appendFileSync, mkdirSync, writeFileSync } from 'node:fs'
import { dirname } from 'node:path'

export interface Figure { name: string; value: number; unit: string }

/** One load run's latency percentiles, in microseconds. */
export interface LatencyRow { label: string; p50: number; p90: number; p99: number; p999: number }

export interface TargetResult {
  scenario: string
  /** As the issue words it, e.g. "throughput ≥ 60 % of uWS hello". */
  text: string
  /** null: not measured in this run (missing baseline, skipped scenario). */
  met: boolean | null
  detail: string
}

export interface Skip { step: string; reason: string }

export function formatValue(value: number): string {
  if (!Number.isFinite(value)) return String(value)
  if (Number.isInteger(value)) return String(value)
  const abs = Math.abs(value)
  return abs >= 100 ? String(Math.round(value)) : abs >= 1 ? value.toFixed(2) : value.toFixed(3)
}

export class Results {
  readonly figures: Figure[] = []
  readonly latencies: LatencyRow[] = []
  readonly targets: TargetResult[] = []
  readonly skips: Skip[] = []
  readonly notes: string[] = []
  /** --profile: Markdown lines per profiled run (bench/lib/profile.ts). */
  readonly profiles: string[] = []
  readonly #byName = new Map<string, Figure>()
  readonly #jsonl: string

  constructor(jsonlPath: string, meta: Record<string, unknown>) {
    this.#jsonl = jsonlPath
    mkdirSync(dirname(jsonlPath), { recursive: true })
    writeFileSync(jsonlPath, JSON.stringify({ type: 'meta', ...meta }) + '\n')
  }

  #write(obj: Record<string, unknown>): void {
    appendFileSync(this.#jsonl, JSON.stringify(obj) + '\n')
  }

  /** Records and prints `bench: <name> <value> <unit>`. Non-finite values are not figures. */
  figure(name: string, value: number, unit: string): void {
    if (!Number.isFinite(value)) {
      this.note(`${name} not measured (${value})`)
      return
    }
    const f = { name, value, unit }
    this.figures.push(f)
    this.#byName.set(name, f)
    console.log(`bench: ${name} ${formatValue(value)} ${unit}`)
    this.#write({ type: 'figure', ...f })
  }

  profile(markdown: readonly string[]): void {
    this.profiles.push(...markdown)
  }

  get(name: string): number | undefined {
    return this.#byName.get(name)?.value
  }

  /** A ratio figure when both sides were measured; the ratio value otherwise undefined. */
  ratio(name: string, numerator: string, denominator: string): number | undefined {
    const a = this.get(numerator)
    const b = this.get(denominator)
    if (a === undefined || b === undefined || b === 0) return undefined
    this.figure(name, a / b, 'ratio')
    return a / b
  }

  /** `minuend − subtrahend` as a figure in `unit`, when both were reported. */
  difference(name: string, minuend: string, subtrahend: string, unit: string): number | undefined {
    const a = this.get(minuend)
    const b = this.get(subtrahend)
    if (a === undefined || b === undefined) return undefined
    this.figure(name, a - b, unit)
    return a - b
  }

  latency(row: LatencyRow): void {
    this.latencies.push(row)
    this.#write({ type: 'latency', unit: 'us', ...row })
  }

  target(scenario: string, text: string, met: boolean | null, detail: string): void {
    const t = { scenario, text, met, detail }
    this.targets.push(t)
    console.log(`# target ${met === null ? 'not measured' : met ? 'met' : 'NOT met'}: ${scenario}: ${text} (${detail})`)
    this.#write({ type: 'target', ...t })
  }

  skip(step: string, reason: string): void {
    this.skips.push({ step, reason })
    console.log(`# skipped: ${step}: ${reason}`)
    this.#write({ type: 'skip', step, reason })
  }

  note(text: string): void {
    this.notes.push(text)
    console.log(`# note: ${text}`)
    this.#write({ type: 'note', text })
  }
}

const t0 = Date.now()

/** A `# …` progress line, with the seconds since the run started. */
export function progress(text: string): void {
  console.log(`# [${((Date.now() - t0) / 1000).toFixed(1).padStart(5)} s] ${text}`)
}
