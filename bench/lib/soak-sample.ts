// What the soak reads from each node while it runs (bench/scenarios/soak.ts): its /metrics
// (prom-client's process and event-loop figures, ours), its open sockets (/proc/<pid>/fd) and its
// journal's size on disk. Heap is kept as the low point of the minute's samples: the heap used at
// any instant is mostly garbage not yet collected, its low points are what stays.
import { readdirSync, readlinkSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { LATENCY_BUCKETS } from '../../gateway/metrics.js'

export interface NodeSample {
  at: number
  rssBytes: number
  heapUsedBytes: number
  loopP99Ms: number
  outboxBacklog: number
  streamClients: number
  sockets: number
  journalBytes: number
  /** Cumulative counts per latency bucket (not cumulative across buckets) of the provider callbacks. */
  callbackBuckets: number[]
}

/** `name{labels} value` lines of one metric, labels as text. */
function values(text: string, name: string): Array<{ labels: string; value: number }> {
  const out: Array<{ labels: string; value: number }> = []
  const re = new RegExp(`^${name}(\\{[^}]*\\})? (\\S+)$`, 'gm')
  for (let m = re.exec(text); m; m = re.exec(text)) out.push({ labels: m[1] ?? '', value: Number(m[2]) })
  return out
}

const one = (text: string, name: string): number => values(text, name)[0]?.value ?? Number.NaN

function socketsOf(pid: number): number {
  let n = 0
  try {
    for (const fd of readdirSync(`/proc/${pid}/fd`)) {
      try { if (readlinkSync(`/proc/${pid}/fd/${fd}`).startsWith('socket:')) n++ } catch { /* closed meanwhile */ }
    }
  } catch { /* gone */ }
  return n
}

function dirBytes(dir: string): number {
  let n = 0
  try {
    for (const f of readdirSync(dir)) { try { n += statSync(join(dir, f)).size } catch { /* deleted meanwhile */ } }
  } catch { /* not there yet */ }
  return n
}

export async function sampleNode(metricsUrl: string, pid: number, journalDir: string): Promise<NodeSample | null> {
  let text: string
  try {
    text = await (await fetch(metricsUrl, { signal: AbortSignal.timeout(5_000) })).text()
  } catch {
    return null
  }
  const buckets = new Array<number>(LATENCY_BUCKETS.length + 1).fill(0)
  // Cumulative `le` buckets of every callback route and status class, summed, then made per bucket.
  for (const v of values(text, 'maskline_http_request_duration_seconds_bucket')) {
    if (!v.labels.includes('route="/v1/webhooks/cpaas/')) continue
    const le = /le="([^"]+)"/.exec(v.labels)?.[1]
    const i = le === '+Inf' ? LATENCY_BUCKETS.length : LATENCY_BUCKETS.indexOf(Number(le))
    if (i >= 0) buckets[i]! += v.value
  }
  for (let i = buckets.length - 1; i > 0; i--) buckets[i]! -= buckets[i - 1]!
  return {
    at: Date.now(),
    rssBytes: one(text, 'process_resident_memory_bytes'),
    heapUsedBytes: one(text, 'nodejs_heap_size_used_bytes'),
    loopP99Ms: one(text, 'nodejs_eventloop_lag_p99_seconds') * 1000,
    outboxBacklog: one(text, 'maskline_outbox_backlog'),
    streamClients: one(text, 'maskline_stream_clients'),
    sockets: socketsOf(pid),
    journalBytes: dirBytes(journalDir),
    callbackBuckets: buckets,
  }
}

/** The p99 (upper bound of its bucket, ms) of the callbacks answered between two samples. */
export function callbackP99Ms(a: NodeSample, b: NodeSample): number {
  const d = b.callbackBuckets.map((x, i) => x - a.callbackBuckets[i]!)
  const total = d.reduce((s, x) => s + x, 0)
  if (total <= 0) return Number.NaN
  let acc = 0
  for (let i = 0; i < d.length; i++) {
    acc += d[i]!
    if (acc >= total * 0.99) return i < LATENCY_BUCKETS.length ? LATENCY_BUCKETS[i]! * 1000 : Infinity
  }
  return Infinity
}

export const percentile = (xs: readonly number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))] ?? Number.NaN
}
