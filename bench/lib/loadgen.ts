// One load run: wrk (replaying a request file with bench/wrk/replay.lua) or, without wrk,
// autocannon in a child process. Either way the load side runs pinned to the load core.
import { fileURLToPath } from 'node:url'
import type { LoadGenerator, Pinning } from './machine.js'
import { runChild } from './proc.js'

const REPLAY_LUA = fileURLToPath(new URL('../wrk/replay.lua', import.meta.url))
const AUTOCANNON_CHILD = fileURLToPath(new URL('./autocannon-child.ts', import.meta.url))

export interface LoadErrors { connect: number; read: number; write: number; status: number; timeout: number }

export interface LoadResult {
  tool: LoadGenerator['kind']
  requests: number
  durationS: number
  /** Responses per second, any status. */
  rps: number
  /** 2xx/3xx responses per second: the throughput figure. */
  okRps: number
  errors: LoadErrors
  latencyUs: { p50: number; p90: number; p99: number; p999: number; mean: number; max: number }
  connections: number
}

export interface LoadSpec {
  url: string
  file: string
  connections: number
  durationS: number
  /** Offer about this many requests per second in all (paced), instead of as many as answered. */
  rate?: number
}

export async function runLoad(gen: LoadGenerator, pin: Pinning, spec: LoadSpec): Promise<LoadResult> {
  const seconds = Math.max(1, Math.round(spec.durationS))
  const threads = 1 // one core for the load side: more threads would only take turns on it
  const connections = Math.max(threads, spec.connections)
  if (gen.kind === 'wrk') {
    const lines = await runChild({
      name: 'wrk', cmd: gen.path, core: pin.loadCore, pin,
      args: ['-t', String(threads), '-c', String(connections), '-d', `${seconds}s`, '--timeout', '5s',
        '-s', REPLAY_LUA, spec.url, '--', spec.file, String(threads),
        ...(spec.rate ? [String(spec.rate / threads)] : [])],
    }, (seconds + 60) * 1000)
    const line = lines.find(l => l.startsWith('WRKJSON '))
    if (!line) throw new Error(`wrk printed no result:\n${lines.join('\n')}`)
    const j = JSON.parse(line.slice(8)) as {
      requests: number; duration_us: number; errors: LoadErrors
      latency_us: { p50: number; p90: number; p99: number; p999: number; mean: number; max: number }
    }
    const durationS = j.duration_us / 1e6
    // wrk counts every non-2xx/3xx response in errors.status, and the response itself in requests.
    return {
      tool: 'wrk', requests: j.requests, durationS, rps: j.requests / durationS,
      okRps: (j.requests - j.errors.status) / durationS, errors: j.errors,
      latencyUs: { p50: j.latency_us.p50, p90: j.latency_us.p90, p99: j.latency_us.p99, p999: j.latency_us.p999, mean: j.latency_us.mean, max: j.latency_us.max },
      connections,
    }
  }
  const lines = await runChild({
    name: 'autocannon', cmd: process.execPath, core: pin.loadCore, pin,
    args: ['--import', 'tsx', AUTOCANNON_CHILD, spec.url, spec.file, String(connections), String(seconds), ...(spec.rate ? [String(Math.round(spec.rate))] : [])],
  }, (seconds + 60) * 1000)
  const line = lines.find(l => l.startsWith('ACJSON '))
  if (!line) throw new Error(`autocannon printed no result:\n${lines.join('\n')}`)
  return { ...(JSON.parse(line.slice(7)) as Omit<LoadResult, 'tool' | 'connections'>), tool: 'autocannon', connections }
}

/** Share of responses that were not 2xx/3xx, or did not come at all. */
export function failureShare(r: LoadResult): number {
  const failed = r.errors.status + r.errors.timeout + r.errors.read + r.errors.connect
  return r.requests + r.errors.timeout > 0 ? failed / (r.requests + r.errors.timeout) : 1
}
