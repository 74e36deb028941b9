// Events and usage caused by provider callbacks are written behind the answer, in small batches
// (group commit: one transaction per ~10 ms), then fanned out. A provider retries a callback we
// failed to answer, but not one we answered, so a failed batch is retried before it is dropped
// (and then logged by code only).
import type { DatabasePool } from 'slonik'
import type { EventEnvelope } from '../api/event-envelope.js'
import type { UsageInput } from '../sql/billing.js'
import { writeEventsAndUsage } from '../sql/telephony.js'

export interface EventWriter {
  write(envelopes: EventEnvelope[], usage?: UsageInput[]): void
  flush(): Promise<void>
  close(): Promise<void>
}

export function createEventWriter(opts: {
  db: DatabasePool
  announce: (envelopes: EventEnvelope[]) => void
  onError: (code: string) => void
  flushMs?: number
}): EventWriter {
  const flushMs = opts.flushMs ?? 10
  let envs: EventEnvelope[] = []
  let usage: UsageInput[] = []
  let timer: NodeJS.Timeout | null = null
  let running: Promise<void> = Promise.resolve()

  function schedule() {
    if (!timer) timer = setTimeout(() => { timer = null; void flush() }, flushMs)
  }

  async function run(batchEnvs: EventEnvelope[], batchUsage: UsageInput[]) {
    for (let attempt = 0; attempt < 3; attempt++) {
      try {
        await writeEventsAndUsage(opts.db, batchEnvs, batchUsage)
        if (batchEnvs.length) opts.announce(batchEnvs)
        return
      } catch {
        await new Promise(r => setTimeout(r, 50 * (attempt + 1)))
      }
    }
    opts.onError('event-batch-dropped')
  }

  function flush(): Promise<void> {
    if (timer) { clearTimeout(timer); timer = null }
    if (!envs.length && !usage.length) return running
    const e = envs, u = usage
    envs = []; usage = []
    running = running.then(() => run(e, u))
    return running
  }

  return {
    write(e, u) {
      for (const x of e) envs.push(x)
      if (u) for (const x of u) usage.push(x)
      schedule()
    },
    flush,
    async close() { await flush() },
  }
}
