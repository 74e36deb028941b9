// The load generator when wrk is missing: autocannon over the first requests of a request file.
// Each connection cycles through the same list (autocannon's model), so signed callbacks repeat
// sooner than with wrk; latencies come in milliseconds and are converted to microseconds.
//
//   node --import tsx bench/lib/autocannon-child.ts URL FILE CONNECTIONS SECONDS [RATE]
import { createRequire } from 'node:module'
import { readRequestFile } from './request-file.js'

interface AcResult {
  duration: number; errors: number; timeouts: number; non2xx: number
  requests: { total: number }
  latency: { p50: number; p90: number; p99: number; p99_9: number; mean: number; max: number }
}
// autocannon ships no type declarations.
const autocannon = createRequire(import.meta.url)('autocannon') as (opts: Record<string, unknown>) => Promise<AcResult>

const [url, file, connections, seconds, rate] = process.argv.slice(2)
const requests = readRequestFile(file!, 2_000).map(r => ({ method: r.method as 'POST', path: r.path, headers: r.headers, body: r.body }))
const result = await autocannon({ url: url!, connections: Number(connections), duration: Number(seconds), requests, ...(rate ? { overallRate: Number(rate) } : {}) })
const ms = (v: number | undefined) => Math.round((v ?? Number.NaN) * 1000)
const durationS = result.duration
const ok = result.requests.total - result.non2xx
console.log('ACJSON ' + JSON.stringify({
  requests: result.requests.total,
  durationS,
  rps: result.requests.total / durationS,
  okRps: ok / durationS,
  errors: { connect: 0, read: result.errors - result.timeouts, write: 0, status: result.non2xx, timeout: result.timeouts },
  latencyUs: { p50: ms(result.latency.p50), p90: ms(result.latency.p90), p99: ms(result.latency.p99), p999: ms(result.latency.p99_9), mean: ms(result.latency.mean), max: ms(result.latency.max) },
}))
