// Child processes of the run: servers under test, load generators, probes. Every child is
// tracked so an interrupted run leaves nothing behind; each is stopped by its own pid.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { closeSync, openSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { createServer } from 'node:net'
import type { Pinning } from './machine.js'

const live = new Set<ChildProcess>()

function killAll(): void {
  for (const c of live) if (c.exitCode === null && c.pid) { try { process.kill(c.pid, 'SIGKILL') } catch { /* gone */ } }
}
process.on('exit', killAll)
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.once(sig, () => {
    killAll()
    process.exit(130)
  })
}

/** A free TCP port on 127.0.0.1 (bound, read, released). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer()
    s.once('error', reject)
    s.listen(0, '127.0.0.1', () => {
      const a = s.address()
      s.close(() => (a && typeof a === 'object' ? resolve(a.port) : reject(new Error('no port'))))
    })
  })
}

export interface SpawnSpec {
  name: string
  cmd: string
  args: readonly string[]
  core: number | null
  pin: Pinning
  env?: NodeJS.ProcessEnv
  /** Child stdout+stderr go to this file (not through the runner); otherwise they are piped. */
  logFile?: string
}

export interface Child {
  name: string
  proc: ChildProcess
  pid: number
  startedAt: number
  /** Lines of stdout so far (piped children only). */
  lines: string[]
  /** Resolves with the first stdout line (or log-file line) that `match` accepts. */
  waitFor<T>(match: (line: string) => T | undefined, timeoutMs: number, what: string): Promise<T>
  /** Every stdout line from now on, to `fn`. */
  onLine(fn: (line: string) => void): void
  exited: Promise<number | null>
  stop(graceMs?: number): Promise<void>
}

export function startChild(spec: SpawnSpec): Child {
  const [cmd, args] = spec.core === null ? [spec.cmd, [...spec.args]] : spec.pin.wrap(spec.core, spec.cmd, spec.args)
  let fd: number | null = null
  if (spec.logFile) fd = openSync(spec.logFile, 'a')
  const proc = spawn(cmd, args, {
    env: spec.env ?? process.env,
    stdio: fd === null ? ['pipe', 'pipe', 'pipe'] : ['pipe', fd, fd],
  })
  if (fd !== null) closeSync(fd)
  live.add(proc)
  const startedAt = Date.now()
  const lines: string[] = []
  const listeners: Array<(line: string) => void> = []
  let stderr = ''
  if (proc.stdout) {
    let buf = ''
    proc.stdout.setEncoding('utf8')
    proc.stdout.on('data', (d: string) => {
      buf += d
      let nl
      while ((nl = buf.indexOf('\n')) !== -1) {
        const line = buf.slice(0, nl)
        buf = buf.slice(nl + 1)
        lines.push(line)
        for (const l of listeners) l(line)
      }
    })
  }
  proc.stderr?.setEncoding('utf8')
  proc.stderr?.on('data', (d: string) => { stderr = (stderr + d).slice(-4_000) })
  const exited = new Promise<number | null>(resolve => proc.once('close', code => { live.delete(proc); resolve(code) }))
  proc.once('error', () => { live.delete(proc) })

  const child: Child = {
    name: spec.name,
    proc,
    pid: proc.pid ?? -1,
    startedAt,
    lines,
    onLine(fn) { listeners.push(fn) },
    exited,
    waitFor<T>(match: (line: string) => T | undefined, timeoutMs: number, what: string): Promise<T> {
      return new Promise<T>((resolve, reject) => {
        let done = false
        let logOffset = 0
        const finish = (err: Error | null, v?: T) => {
          if (done) return
          done = true
          clearTimeout(timer)
          clearInterval(poll)
          if (err) reject(err)
          else resolve(v as T)
        }
        const test = (line: string) => {
          const v = match(line)
          if (v !== undefined) finish(null, v)
        }
        for (const l of lines) test(l)
        listeners.push(test)
        // A child writing to a file is read by polling: its output never passes through us.
        const poll = setInterval(() => {
          if (!spec.logFile) return
          let size: number
          try { size = statSync(spec.logFile).size } catch { return }
          if (size <= logOffset) return
          const text = readFileSync(spec.logFile, 'utf8').slice(logOffset)
          const end = text.lastIndexOf('\n')
          if (end === -1) return
          logOffset += Buffer.byteLength(text.slice(0, end + 1))
          for (const l of text.slice(0, end).split('\n')) test(l)
        }, 5)
        const timer = setTimeout(() => finish(new Error(`${spec.name}: timed out after ${timeoutMs} ms waiting for ${what}${tail()}`)), timeoutMs)
        void exited.then(code => finish(new Error(`${spec.name} exited (code ${code}) before ${what}${tail()}`)))
      })
    },
    async stop(graceMs = 5_000) {
      if (proc.exitCode !== null || proc.signalCode !== null) return
      proc.kill('SIGTERM')
      const t = setTimeout(() => proc.kill('SIGKILL'), graceMs)
      await exited
      clearTimeout(t)
    },
  }
  function tail(): string {
    let t = stderr
    if (spec.logFile) { try { t = readFileSync(spec.logFile, 'utf8').slice(-2_000) } catch { /* none */ } }
    return t.trim() ? `\n--- last output of ${spec.name} ---\n${t.trim()}` : ''
  }
  return child
}

/** Runs a child to completion and returns its stdout lines; rejects on a non-zero exit. */
export async function runChild(spec: SpawnSpec, timeoutMs: number, input?: string): Promise<string[]> {
  const c = startChild(spec)
  if (input !== undefined) c.proc.stdin?.end(input)
  else c.proc.stdin?.end()
  let stderr = ''
  c.proc.stderr?.on('data', (d: string) => { stderr = (stderr + d).slice(-4_000) })
  const timer = setTimeout(() => c.proc.kill('SIGKILL'), timeoutMs)
  const code = await c.exited
  clearTimeout(timer)
  if (code !== 0) throw new Error(`${spec.name} failed (exit ${code})${stderr.trim() ? `:\n${stderr.trim()}` : ''}`)
  return c.lines
}

/** Resident set size of a live process, in bytes (Linux /proc), or NaN. */
export function rssOf(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+)\s+kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
    return m ? Number(m[1]) * 1024 : Number.NaN
  } catch {
    return Number.NaN
  }
}

export const sleep = (ms: number) => new Promise<void>(r => setTimeout(r, ms))

let clockTicks = 0

/** CPU time (user + system) a live process has used, in seconds (Linux /proc), or NaN. */
export function cpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // Fields after the command name (which may contain spaces) start after the last ')'.
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return (Number(f[11]) + Number(f[12])) / ticks()
  } catch {
    return Number.NaN
  }
}

/**
 * Waits until a server has finished what earlier load left behind (group commits, GC, event
 * fan-out): until it uses less than `threshold` of a core over `windowMs`, or `maxMs` passed.
 */
export async function quiesce(pid: number, maxMs: number, threshold = 0.1, windowMs = 500): Promise<{ waitedMs: number; idle: boolean }> {
  const t0 = Date.now()
  let before = cpuSeconds(pid)
  if (!Number.isFinite(before)) return { waitedMs: 0, idle: true }
  for (;;) {
    await sleep(windowMs)
    const now = cpuSeconds(pid)
    if (now - before < threshold * (windowMs / 1000)) return { waitedMs: Date.now() - t0, idle: true }
    if (Date.now() - t0 >= maxMs) return { waitedMs: Date.now() - t0, idle: false }
    before = now
  }
}

export interface CpuSnapshot { at: number; total: number; service: number; postgres: number }

function ticks(): number {
  if (!clockTicks) clockTicks = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout?.trim()) || 100
  return clockTicks
}

/**
 * Machine-wide CPU seconds (Linux /proc/stat, all cores, busy only) and those of the service
 * process and of every local Postgres process (with the exited backends the postmaster reaped),
 * for a split of where a run's time went.
 */
export function cpuSnapshot(servicePid: number): CpuSnapshot {
  const snap: CpuSnapshot = { at: Date.now(), total: Number.NaN, service: cpuSeconds(servicePid), postgres: 0 }
  try {
    const f = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number)
    // user nice system idle iowait irq softirq steal: busy = all but idle and iowait.
    snap.total = (f[0]! + f[1]! + f[2]! + f[5]! + f[6]! + (f[7] ?? 0)) / ticks()
    for (const pid of readdirSync('/proc')) {
      if (!/^\d+$/.test(pid)) continue
      let stat: string
      try { stat = readFileSync(`/proc/${pid}/stat`, 'utf8') } catch { continue }
      const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'))
      if (!comm.startsWith('postgres') && !comm.startsWith('postmaster')) continue
      const v = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
      // utime + stime, and cutime + cstime: the postmaster's count the backends that exited and
      // were reaped, whose time would otherwise vanish from the sum (a negative figure).
      snap.postgres += (Number(v[11]) + Number(v[12]) + Number(v[13]) + Number(v[14])) / ticks()
    }
  } catch { /* not Linux */ }
  return snap
}

/** Cores used per group between two snapshots: service, Postgres, and the rest (load generator, others). */
export function cpuSplit(a: CpuSnapshot, b: CpuSnapshot): { service: number; postgres: number; rest: number } | null {
  const s = (b.at - a.at) / 1000
  if (!(s > 0) || !Number.isFinite(a.total) || !Number.isFinite(b.service - a.service)) return null
  const service = (b.service - a.service) / s
  const postgres = (b.postgres - a.postgres) / s
  return { service, postgres, rest: Math.max(0, (b.total - a.total) / s - service - postgres) }
}
