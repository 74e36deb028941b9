// What every scenario gets, and the two kinds of load run: loaded (many connections, the
// throughput and its latency) and unloaded (one connection: the latency of one request alone).
import type { Options } from '../lib/args.js'
import { failureShare, runLoad, type LoadResult } from '../lib/loadgen.js'
import type { LoadGenerator, Pinning } from '../lib/machine.js'
import type { Population } from '../lib/population.js'
import type { TelnyxKeyPair } from '../../test/support/callback-driver.js'
import { cpuSnapshot, cpuSplit, quiesce } from '../lib/proc.js'
import { progress, type Results } from '../lib/results.js'
import { monotonicUs, type ProfileWindow } from '../lib/profile.js'

export interface Keys {
  telnyx: TelnyxKeyPair
  /** PKCS#8 PEM of the Telnyx private key, for the SMS probe child. */
  telnyxPrivatePem: string
  hmacSecret: string
  jwtSecret: string
  /** base64, 32 bytes. */
  phoneKey: string
}

export interface Ctx {
  opts: Options
  pin: Pinning
  gen: LoadGenerator
  results: Results
  /** Scratch directory: request files. */
  work: string
  /** Where service logs go (bench/results/<stamp>.<name>.log, ignored by git). */
  logPrefix: string
  pop: Population
  keys: Keys
  /** The service under test while one runs: load runs first wait for it to go idle. */
  serverPid?: number
  /** With --profile, while a service runs: the windows of its loaded runs (bench/lib/profile.ts). */
  profileWindows?: ProfileWindow[]
}

export interface LoadedRun {
  /** Figure prefix, e.g. `voice.none`. */
  name: string
  /** Row label in the latency chart. */
  label: string
  url: string
  file: string
  /** Distinct requests in `file`: beyond that, wrk starts the file over. */
  distinct?: number
  /** The caller already waited for an idle service (and started something alongside since). */
  settled?: boolean
  /** What a repeated request means for this endpoint (default: a replayed provider callback). */
  repeats?: string
  warmFile?: string
  connections?: number
  /** Paced at about this many requests per second (see LoadSpec.rate). */
  rate?: number
}

function check(ctx: Ctx, name: string, r: LoadResult): void {
  const share = failureShare(r)
  if (share > 0.001) {
    ctx.results.note(`${name}: ${(share * 100).toFixed(2)} % of responses failed or were not 2xx/3xx ` +
      `(status ${r.errors.status}, timeout ${r.errors.timeout}, read ${r.errors.read}, connect ${r.errors.connect}); throughput counts 2xx/3xx only`)
  }
}

/** Each run starts on an idle server: work queued by the previous run is not this run's cost. */
export async function settle(ctx: Ctx, label: string): Promise<void> {
  // A smoke run proves the plumbing; its figures are not read, so it does not wait.
  if (ctx.serverPid === undefined || ctx.opts.smoke) return
  // A quarter of a core: the service's own timers (expiry sweep, outbox polling) on embedded
  // PGlite never let it reach zero.
  const q = await quiesce(ctx.serverPid, 60_000, 0.25)
  if (!q.idle) ctx.results.note(`${label}: the service was still busy after ${Math.round(q.waitedMs / 1000)} s of waiting for it to go idle; measured anyway`)
  else if (q.waitedMs > 1_000) progress(`${label}: waited ${(q.waitedMs / 1000).toFixed(1)} s for the service to go idle`)
}

export async function loaded(ctx: Ctx, run: LoadedRun): Promise<LoadResult> {
  const connections = run.connections ?? ctx.opts.connections
  if (!run.settled) await settle(ctx, run.label)
  if (run.warmFile && ctx.opts.warmup > 0) {
    progress(`${run.label}: warm-up ${ctx.opts.warmup} s`)
    await runLoad(ctx.gen, ctx.pin, { url: run.url, file: run.warmFile, connections, durationS: ctx.opts.warmup })
  }
  progress(`${run.label}: ${connections} connections, ${ctx.opts.duration} s${run.rate ? `, paced at ${Math.round(run.rate)} req/s` : ''}`)
  const startUs = monotonicUs()
  const cpu0 = ctx.serverPid === undefined ? null : cpuSnapshot(ctx.serverPid)
  const r = await runLoad(ctx.gen, ctx.pin, { url: run.url, file: run.file, connections, durationS: ctx.opts.duration, ...(run.rate ? { rate: run.rate } : {}) })
  const split = cpu0 && cpuSplit(cpu0, cpuSnapshot(ctx.serverPid!))
  ctx.profileWindows?.push({ name: run.name, startUs, endUs: monotonicUs() })
  check(ctx, run.name, r)
  if (run.distinct !== undefined && r.requests > run.distinct) {
    ctx.results.note(`${run.name}: ${r.requests} requests over ${run.distinct} pre-generated ones: ` +
      `${Math.round((1 - run.distinct / r.requests) * 100)} % repeated one already sent ` +
      `(${run.repeats ?? 'a replayed provider id is answered again and changes nothing twice'})`)
  }
  ctx.results.figure(`${run.name}.rps`, r.okRps, 'req/s')
  ctx.results.figure(`${run.name}.p50`, r.latencyUs.p50, 'us')
  ctx.results.figure(`${run.name}.p99`, r.latencyUs.p99, 'us')
  ctx.results.latency({ label: run.label, ...r.latencyUs })
  if (split && r.okRps > 0) {
    // Where the machine's time went, per answered request: the service's own CPU, Postgres's
    // (the records, events and usage written behind the answers), and the rest (the load
    // generator and anything else running).
    ctx.results.figure(`${run.name}.cpu_per_req.service`, split.service * 1e6 / r.okRps, 'us')
    ctx.results.figure(`${run.name}.cpu_per_req.postgres`, split.postgres * 1e6 / r.okRps, 'us')
    ctx.results.figure(`${run.name}.cpu_per_req.rest`, split.rest * 1e6 / r.okRps, 'us')
  }
  return r
}

export async function unloaded(ctx: Ctx, run: LoadedRun): Promise<LoadResult> {
  await settle(ctx, `${run.label}, 1 connection`)
  progress(`${run.label}: unloaded, 1 connection, ${ctx.opts.unloadedDuration} s`)
  const r = await runLoad(ctx.gen, ctx.pin, { url: run.url, file: run.file, connections: 1, durationS: ctx.opts.unloadedDuration })
  check(ctx, `${run.name}.unloaded`, r)
  ctx.results.figure(`${run.name}.unloaded_p50`, r.latencyUs.p50, 'us')
  ctx.results.latency({ label: `${run.label}, 1 conn.`, ...r.latencyUs })
  return r
}

/** Distinct requests to pre-generate for a run of `seconds` at up to `rps`, within `cap`. */
export function requestCount(seconds: number, rps: number, cap: number, min = 1_000): number {
  return Math.max(min, Math.min(cap, Math.ceil(seconds * rps)))
}
