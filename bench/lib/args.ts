// Command line of `npm run bench`: `[--smoke] [--profile] [--sessions N] [--only a,b] [--duration s] [--connections N] [--minutes N] [--rate-scale x]`.
export const SCENARIO_IDS = ['voice', 'ed25519', 'sms', 'create', 'read', 'memory', 'fanout', 'facade'] as const
export type ScenarioId = (typeof SCENARIO_IDS)[number]

export const BASELINE_IDS = ['hello', 'callback-uws', 'fastify', 'verify', 'insert', 'record-ceiling'] as const
export type BaselineId = (typeof BASELINE_IDS)[number]

/**
 * Steps a full run leaves out (only --only picks them; --smoke includes them, where they skip
 * without what they need). two-node: two service processes on one Postgres and one Redis
 * (docs/scaling.md); it needs REDIS_URL and DATABASE_URL, and at the default million sessions it would
 * boot two more services of ~1 GB each and add minutes to a full run. login-flood: sign-in under
 * a login flood and a signup flood (bench/login-flood.bench.ts, its own service child). soak: two
 * nodes on a private Postgres and Redis for `--minutes` (bench/scenarios/soak.ts); in --smoke for
 * 2 minutes at half its mix (SMOKE_SOAK), where only lost work and 5xx outside the restarts fail it.
 */
export const OPTIONAL_IDS = ['two-node', 'login-flood', 'soak'] as const
export type OptionalId = (typeof OPTIONAL_IDS)[number]
/** The soak of a smoke run (CI): both restarts and the no-loss checks, minutes and a half mix. */
export const SMOKE_SOAK = { minutes: 2, rateScale: 0.5 }

export type StepId = ScenarioId | BaselineId | OptionalId

/** What each scenario's ratios and targets are measured against (run automatically with it). */
export const NEEDS: Record<ScenarioId, readonly BaselineId[]> = {
  voice: ['hello', 'callback-uws', 'fastify', 'record-ceiling'],
  ed25519: ['verify', 'record-ceiling'],
  sms: ['hello'],
  create: ['insert'],
  read: ['hello'],
  memory: [],
  fanout: [],
  facade: [],
}

export interface Options {
  smoke: boolean
  /** Run the service under V8's sampling profiler and report where each loaded run's time went. */
  profile: boolean
  sessions: number
  /** Seconds of load per measured run. */
  duration: number
  /** Seconds of the unloaded (1 connection) latency runs. */
  unloadedDuration: number
  /** Seconds of warm-up before each measured run (JIT, connection pools). */
  warmup: number
  connections: number
  steps: ReadonlySet<StepId>
  /** Minutes of the soak (`--only soak --minutes N`). */
  minutes: number
  /** The soak's request rates relative to its mix (bench/lib/soak-load.ts SOAK_RATES). */
  rateScale: number
  /** The command line as given, for the report. */
  command: string
}

export class UsageError extends Error {}

export function parseArgs(argv: readonly string[]): Options {
  const smoke = argv.includes('--smoke')
  const value = (name: string): string | undefined => {
    const i = argv.indexOf(name)
    if (i === -1) return undefined
    const v = argv[i + 1]
    if (v === undefined || v.startsWith('--')) throw new UsageError(`${name} needs a value`)
    return v
  }
  const num = (name: string, dflt: number, min: number): number => {
    const v = value(name)
    if (v === undefined) return dflt
    const n = Number(v.replaceAll('_', ''))
    if (!Number.isFinite(n) || n < min) throw new UsageError(`${name} must be a number ≥ ${min}`)
    return n
  }
  const known = new Set(['--smoke', '--profile', '--sessions', '--only', '--duration', '--connections', '--minutes', '--rate-scale'])
  for (const a of argv) if (a.startsWith('--') && !known.has(a)) throw new UsageError(`unknown option ${a}`)

  const sessions = Math.round(num('--sessions', smoke ? 2_000 : 1_000_000, 10))
  const duration = num('--duration', smoke ? 1 : 10, 0.5)
  const only = value('--only')
  const steps = new Set<StepId>()
  const all: readonly string[] = [...SCENARIO_IDS, ...BASELINE_IDS, ...OPTIONAL_IDS]
  const picked = only === undefined ? [...SCENARIO_IDS, ...(smoke ? OPTIONAL_IDS : [])] : only.split(',').map(s => s.trim()).filter(Boolean)
  for (const p of picked) {
    if (!all.includes(p)) throw new UsageError(`--only: unknown step "${p}" (known: ${all.join(', ')})`)
    steps.add(p as StepId)
    if ((SCENARIO_IDS as readonly string[]).includes(p)) for (const b of NEEDS[p as ScenarioId]) steps.add(b)
  }
  return {
    smoke,
    profile: argv.includes('--profile'),
    sessions,
    duration,
    unloadedDuration: smoke ? Math.min(1, duration) : Math.max(2, Math.min(5, duration / 2)),
    warmup: smoke ? 0 : Math.min(3, Math.max(1, duration / 5)),
    connections: Math.round(num('--connections', 32, 1)),
    minutes: Math.round(num('--minutes', smoke ? SMOKE_SOAK.minutes : 30, 1)),
    rateScale: num('--rate-scale', smoke ? SMOKE_SOAK.rateScale : 1, 0.01),
    steps,
    command: ['npm run bench', ...(argv.length ? ['--', ...argv] : [])].join(' '),
  }
}
