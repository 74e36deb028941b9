// What this machine is and which tools the run can use: CPU, cores, taskset, the load generator.
import { execFileSync, spawnSync } from 'node:child_process'
import { accessSync, constants, readdirSync, readFileSync } from 'node:fs'
import { availableParallelism, cpus, totalmem } from 'node:os'
import { delimiter, join } from 'node:path'

export interface Machine {
  cpuModel: string
  cores: number
  memoryGiB: number
  node: string
  platform: string
  kernel: string
}

export function describeMachine(): Machine {
  let kernel = ''
  try { kernel = readFileSync('/proc/sys/kernel/osrelease', 'utf8').trim() } catch { /* not Linux */ }
  return {
    cpuModel: cpus()[0]?.model.trim() ?? 'unknown CPU',
    cores: availableParallelism(),
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    node: process.version,
    platform: `${process.platform}-${process.arch}`,
    kernel,
  }
}

export function which(cmd: string): string | null {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (!dir) continue
    const p = join(dir, cmd)
    try {
      accessSync(p, constants.X_OK)
      return p
    } catch { /* next */ }
  }
  return null
}

/**
 * Where processes go. With taskset and ≥ 2 cores the load generator (and this runner) sit on
 * core 0 and the server under test on core 1, so they never take turns on one core. Otherwise
 * nothing is pinned, and the report says so.
 */
export interface Pinning {
  enabled: boolean
  why: string
  /** Wraps a command so it runs on `core`; unchanged when pinning is off. */
  wrap(core: number, cmd: string, args: readonly string[]): [string, string[]]
  loadCore: number
  serverCore: number
}

export function detectPinning(): Pinning {
  const taskset = which('taskset')
  const cores = availableParallelism()
  const enabled = taskset !== null && cores >= 2
  const why = enabled ? `taskset: load generator on core 0, server on core 1 (${cores} cores)`
    : taskset === null ? 'taskset not found: processes are not pinned' : `only ${cores} core: processes are not pinned`
  return {
    enabled,
    why,
    loadCore: 0,
    serverCore: 1,
    wrap(core, cmd, args) {
      return enabled ? [taskset!, ['-c', String(core), cmd, ...args]] : [cmd, [...args]]
    },
  }
}

export interface LoadGenerator {
  kind: 'wrk' | 'autocannon'
  path: string
  version: string
  /** How it was found, for the report. */
  how: string
}

function wrkVersion(path: string): string {
  // `wrk -v` prints its banner and usage on stdout and exits 1.
  const r = spawnSync(path, ['-v'], { encoding: 'utf8' })
  return /wrk\s+(\S+)/.exec(`${r.stdout}${r.stderr}`)?.[1] ?? 'unknown'
}

/**
 * wrk from PATH; else, as root, `apt-get install -y wrk`; else autocannon (a devDependency).
 * BENCH_LOAD_GENERATOR=autocannon forces the fallback (to compare the two, or to test it).
 */
export function findLoadGenerator(log: (line: string) => void): LoadGenerator {
  if (process.env.BENCH_LOAD_GENERATOR === 'autocannon') return autocannon('forced by BENCH_LOAD_GENERATOR=autocannon')
  const found = which('wrk')
  if (found) return { kind: 'wrk', path: found, version: wrkVersion(found), how: `found ${found}` }
  let tried = 'not root, so not installed'
  if (process.getuid?.() === 0 && which('apt-get')) {
    log('wrk not found; installing the Debian package: apt-get install -y wrk')
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' }
    let r = spawnSync('apt-get', ['install', '-y', '--no-install-recommends', 'wrk'], { stdio: 'ignore', env, timeout: 180_000 })
    if (r.status !== 0) {
      spawnSync('apt-get', ['update'], { stdio: 'ignore', env, timeout: 180_000 })
      r = spawnSync('apt-get', ['install', '-y', '--no-install-recommends', 'wrk'], { stdio: 'ignore', env, timeout: 180_000 })
    }
    const after = which('wrk')
    if (r.status === 0 && after) return { kind: 'wrk', path: after, version: wrkVersion(after), how: 'installed with apt-get install -y wrk' }
    tried = 'apt-get install -y wrk failed'
  }
  return autocannon(`wrk not found (${tried}); using autocannon from devDependencies`)
}

function autocannon(how: string): LoadGenerator {
  let version = 'unknown'
  try { version = JSON.parse(readFileSync(join(process.cwd(), 'node_modules', 'autocannon', 'package.json'), 'utf8')).version } catch { /* reported as unknown */ }
  return { kind: 'autocannon', path: 'autocannon', version, how }
}

export function gitRevision(): string {
  try {
    return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim()
  } catch {
    return 'unknown'
  }
}

/**
 * A local Postgres shares the machine with the service and the load generator. Left alone, the
 * scheduler wakes a backend on the service's core after every statement the service sends, and
 * the service stalls behind it (the profiles show that time inside socket writes). With 2 cores
 * the least bad place for it is the load generator's core. Pins every local Postgres process
 * (new backends inherit the postmaster's affinity) and returns how to undo it; null when
 * pinning is off, the database is not on this machine, or the processes may not be pinned.
 */
export function pinLocalPostgres(pin: Pinning, databaseUrl: string): { why: string; restore: () => void } | null {
  const taskset = which('taskset')
  if (!pin.enabled || !taskset) return null
  let host: string
  try { host = new URL(databaseUrl).hostname } catch { return null }
  if (!['127.0.0.1', 'localhost', '::1', '[::1]', ''].includes(host)) return null
  const pids = postgresPids()
  if (pids.length === 0) return null
  const before = new Map<string, string>()
  for (const p of pids) {
    const m = /: (\S+)\s*$/.exec(spawnSync(taskset, ['-pc', p], { encoding: 'utf8' }).stdout ?? '')
    if (m) before.set(p, m[1]!)
  }
  const failed = pids.filter(p => spawnSync(taskset, ['-pc', String(pin.loadCore), p], { encoding: 'utf8' }).status !== 0)
  let restored = false
  const restore = () => {
    if (restored) return
    restored = true
    const dflt = [...before.values()][0] ?? `0-${availableParallelism() - 1}`
    for (const p of postgresPids()) spawnSync(taskset, ['-pc', before.get(p) ?? dflt, p])
  }
  process.once('exit', restore) // also when the run is interrupted
  if (failed.length === pids.length) return null
  return { why: `local Postgres (${pids.length - failed.length} processes) pinned to core ${pin.loadCore} with the load generator, restored at the end`, restore }
}

function postgresPids(): string[] {
  return readdirSync('/proc').filter(p => /^\d+$/.test(p)).filter(p => {
    try { return /^(postgres|postmaster)$/.test(readFileSync(`/proc/${p}/comm`, 'utf8').trim()) } catch { return false }
  })
}
