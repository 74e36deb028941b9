// What the service itself says about a run: its access log line per request (gateway/http/app.ts)
// carries `us`, the time from the handler's start to the answer written, inside the process. Read
// from the service's log file (logging at info, as in production) for one route and time window.
import { readFileSync } from 'node:fs'

export interface Percentiles { p50: number; p90: number; p99: number; p999: number }

function percentiles(values: number[]): Percentiles {
  const v = Float64Array.from(values).sort()
  const at = (p: number) => v[Math.min(v.length - 1, Math.floor(p * v.length))]!
  return { p50: at(0.5), p90: at(0.9), p99: at(0.99), p999: at(0.999) }
}

export function handlerLatency(logFile: string, route: string, fromMs: number, toMs: number): { count: number; us: Percentiles } | null {
  let text: string
  try { text = readFileSync(logFile, 'utf8') } catch { return null }
  const needle = `"route":${JSON.stringify(route)}`
  const values: number[] = []
  for (const line of text.split('\n')) {
    if (!line.includes(needle)) continue
    const time = /"time":(\d+)/.exec(line)
    const us = /"us":(\d+)/.exec(line)
    if (!time || !us) continue
    const t = Number(time[1])
    if (t >= fromMs && t <= toMs) values.push(Number(us[1]))
  }
  return values.length ? { count: values.length, us: percentiles(values) } : null
}
