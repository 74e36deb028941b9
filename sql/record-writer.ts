// Call and SMS records are written behind the provider's answer (the provider waits for TeXML, not
// for our disk): operations are queued, cut into a batch every `flushMs` (10 ms) or `maxBatch`
// operations, and applied by group commit (sql/record-apply.ts), strictly in order, one apply at a
// time. The local journal (sql/journal.ts) holds what Postgres has not taken: a batch still not
// committed `journalAfterMs` (20 ms) after its cut is appended to it, and so is every pending
// batch when a caller needs its operations to survive a crash (`sync`: an SMS is acknowledged only
// then), past the memory bound, and at close. A batch that commits in time never touches the disk
// (appending every batch cost the voice path an O_DSYNC write per 10 ms: bench/RESULTS.md, "What moved the figures", cfa5b7e).
//
// Nothing the service answered for is forgotten (contract D5):
// - A batch Postgres cannot take now (connection lost, server down, deadlock) is retried with
//   backoff until it can, however long that takes; later batches wait behind it, so a call's
//   operations stay in order. While it waits, the backlog is merged into larger applies.
// - A single operation Postgres refuses (a bad value) is dropped alone, reported by code; the rest
//   of its batch is applied one operation at a time.
// - Memory is bounded: past `maxPending` operations, new batches live only in the journal and are
//   read back when their turn comes. The journal is also what a crash or a stop leaves behind:
//   boot replays it (`replay`) before serving.
// - Every promise this returns settles, and nothing here can wedge the queue: a throw anywhere in
//   an apply or in a hub listener is caught, reported, and the next batch goes on.
import { setTimeout as sleep } from 'node:timers/promises'
import type { DatabasePool } from 'slonik'
import type { EventEnvelope } from './vocabulary/event-envelope.js'
import { errorCode, guard, toStoreError } from './errors.js'
import type { Journal, JournalEntry } from './journal.js'
import type { Hub } from './hub.js'
import { applyOps } from './record-apply.js'
import { CallMemory, failedResult, opsJson, type OpData, type RecordWriter, type Result, type SmsClaim, type WriterStats } from './record-ops.js'
import { directPool, directTransaction } from './direct.js'
import { transact } from './transaction.js'

export { CALL_START, type CallCallback, type CallInsert, type CallKey, type Effects, type RecordWriter, type SmsClaim, type SmsInsert, type WriterStats } from './record-ops.js'

interface Op {
  data: OpData
  done: (r: Result) => void
}

interface Batch {
  ops: Op[] | null // null: spilled, read back from the journal
  count: number
  /** performance.now() of the cut. */
  cutAt: number
  /** Its journal line once written (null: not journaled, or the disk refused it). */
  entry: JournalEntry | null
  /** Settles once its journal append settled; null while it was never asked to be journaled. */
  journaled: Promise<void> | null
  /** Committed (or refused for good): nothing left to keep for it. */
  done: boolean
  applied: Promise<void>
  resolve: () => void
}

export interface RecordWriterOptions {
  flushMs?: number
  maxBatch?: number
  /** Operations per apply when a backlog is merged (after an outage). */
  maxApply?: number
  /** Operations held in memory; past it, batches live only in the journal. */
  maxPending?: number
  journal?: Journal | null
  /** A batch not committed this long after its cut is appended to the journal (default 2 × flushMs). */
  journalAfterMs?: number
  /** Backoff of a failed apply: first wait and cap. */
  retryMs?: { first: number; max: number }
  onError?: (code: string) => void
  /** After commit, `records` with the events just written (stream, other nodes, webhook dispatcher). */
  hub?: Hub
}

/** Young calls remembered (two generations of half this), so their callbacks need no read. */
const CALL_CACHE = 200_000
/** …and for this long at most: a call's callbacks after it (a long call's end) read it back. */
const CALL_CACHE_MS = 15 * 60_000

export function createRecordWriter(pool: DatabasePool, opts: RecordWriterOptions = {}): RecordWriter {
  const flushMs = opts.flushMs ?? 10
  const maxBatch = opts.maxBatch ?? 200
  const maxApply = opts.maxApply ?? 2_000
  const maxPending = opts.maxPending ?? 1_000_000
  const journal = opts.journal ?? null
  const journalAfterMs = opts.journalAfterMs ?? 2 * flushMs
  const retryMs = opts.retryMs ?? { first: 50, max: 1_000 }
  const onError = opts.onError ?? (() => {})
  const hub = opts.hub ?? null
  const calls = new CallMemory(CALL_CACHE, CALL_CACHE_MS)
  const stats: WriterStats = { pending: 0, spilled: 0, retries: 0, refused: 0 }

  let pending: Op[] = []
  let timer: NodeJS.Timeout | null = null
  /** Cuts in order: each puts its batch on the backlog (a batch past the memory bound once journaled). */
  let cutting: Promise<void> = Promise.resolve()
  /** Batches cut and neither committed nor journaled, oldest first (with a journal only). */
  const exposed: Batch[] = []
  /** Wakes up when the oldest exposed batch is due for the journal. */
  let exposedTimer: NodeJS.Timeout | null = null
  /** The latest append asked of the journal (they settle in order). */
  let lastJournaled: Promise<void> = Promise.resolve()
  const backlog: Batch[] = []
  let lastBatch: Batch | null = null
  /** Operations of the backlog held in memory (the rest were spilled to the journal). */
  let held = 0
  let draining: Promise<void> | null = null
  let closed = false
  /** Past the close grace: stop retrying; what is left stays in the journal. */
  let stopping = false

  function enqueue<T extends Result>(data: OpData): Promise<T> {
    if (closed) {
      onError('writer-closed')
      return Promise.resolve(failedResult(data) as T)
    }
    stats.pending++
    return new Promise<T>(resolve => {
      pending.push({ data, done: resolve as (r: Result) => void })
      // cut()'s promise settles when the batch is queued for apply; callers wait on their own op.
      if (pending.length >= maxBatch) void cut()
      else timer ??= setTimeout(() => void cut(), flushMs)
    })
  }

  function cut(): Promise<void> {
    if (timer) clearTimeout(timer)
    timer = null
    if (pending.length === 0) return cutting
    const ops = pending
    pending = []
    let resolve!: () => void
    const applied = new Promise<void>(r => { resolve = r })
    const batch: Batch = { ops, count: ops.length, cutAt: performance.now(), entry: null, journaled: null, done: false, applied, resolve }
    lastBatch = batch
    cutting = cutting.then(async () => {
      if (journal && held + ops.length > maxPending) {
        // The memory bound: the batch lives on in the journal only. Its callers cannot be told
        // an outcome that may come hours later; they get the failure value now.
        journalExposed(exposed.length)
        await journalBatch(batch)
        if (batch.entry) {
          batch.ops = null
          stats.spilled += ops.length
          for (const op of ops) op.done(failedResult(op.data))
        }
      }
      if (batch.ops) {
        held += ops.length
        if (journal && !batch.journaled) {
          exposed.push(batch)
          watchExposed()
        }
      }
      backlog.push(batch)
      draining ??= drain().finally(() => { draining = null })
    })
    return cutting
  }

  /** Appends one batch to the journal; the journal's done mark follows its commit, whichever comes first. */
  function journalBatch(b: Batch): Promise<void> {
    b.journaled ??= journal!.append(opsJson(b.ops!.map(o => o.data))).then(entry => {
      b.entry = entry
      if (entry && b.done) journal!.done(entry)
    }, (err: unknown) => { onError(errorCode(err)) })
    lastJournaled = b.journaled
    return b.journaled
  }

  /** The first `n` exposed batches to the journal, in order (the journal numbers its lines in that order). */
  function journalExposed(n: number): void {
    for (const b of exposed.splice(0, n)) void journalBatch(b)
  }

  function watchExposed(): void {
    if (exposedTimer !== null || exposed.length === 0) return
    exposedTimer = setTimeout(() => {
      exposedTimer = null
      const dueBefore = performance.now() - journalAfterMs
      let n = 0
      while (n < exposed.length && exposed[n]!.cutAt <= dueBefore) n++
      journalExposed(n)
      watchExposed()
    }, Math.max(0, exposed[0]!.cutAt + journalAfterMs - performance.now()))
  }

  /** A batch that no longer needs the journal: committed, or refused for good. */
  function settled(b: Batch): void {
    b.done = true
    if (b.entry && journal) journal.done(b.entry)
    // Batches enter `exposed` and the backlog in cut order and settle in that order: an exposed
    // batch that settles is the oldest one.
    if (exposed[0] === b) exposed.shift()
  }

  async function drain(): Promise<void> {
    while (backlog.length > 0 && !stopping) {
      const take: Batch[] = []
      let n = 0
      while (backlog.length > 0 && (take.length === 0 || n + backlog[0]!.count <= maxApply)) {
        const b = backlog.shift()!
        take.push(b)
        n += b.count
      }
      const ops: Op[] = []
      for (const b of take) ops.push(...(b.ops ?? await readBack(b)))
      if (!await applyWithRetry(ops)) return // stopped: the batches stay in the journal
      for (const b of take) {
        settled(b)
        stats.pending -= b.count
        if (b.ops) held -= b.count
        else stats.spilled -= b.count
        b.resolve()
      }
    }
  }

  async function readBack(b: Batch): Promise<Op[]> {
    try {
      const data = (await journal!.read(b.entry!)) as OpData[]
      return data.map(d => ({ data: d, done: () => {} }))
    } catch (err) {
      onError(errorCode(err))
      return []
    }
  }

  const transient = (slug: string) => slug === 'unavailable' || slug === 'retryable'

  /** Runs ops in one unit until Postgres takes them or refuses them; true when applied. */
  async function attempt(ops: Op[], results: Result[], events: EventEnvelope[]): Promise<'applied' | 'refused' | 'stopped'> {
    const data = ops.map(o => o.data)
    for (let n = 0; ; n++) {
      try {
        // On the plain `pg` path (sql/direct.ts: the hot statements named, no slonik per-query
        // work). A batch of new calls only is one statement: atomic without BEGIN/COMMIT, which
        // would be two more round trips on every flush of the voice path. Deadlocks and lost
        // connections are retried by the loop here, with its backoff.
        const direct = directPool(pool)
        const alone = data.every(d => d.kind === 'call')
        const out = direct
          ? await guard(() => (alone ? applyOps(direct.queries, data, calls) : directTransaction(direct, q => applyOps(q, data, calls))))
          : alone ? await guard(() => applyOps(pool, data, calls)) : await transact(pool, tx => applyOps(tx, data, calls))
        out.results.forEach((r, i) => { results[i] = r })
        events.push(...out.events)
        for (const c of out.calls) calls.set(c)
        return 'applied'
      } catch (err) {
        const e = toStoreError(err)
        onError(e.code)
        if (!transient(e.slug)) return 'refused'
        if (stopping) return 'stopped'
        stats.retries++
        await sleep(Math.min(retryMs.max, retryMs.first * 2 ** Math.min(n, 10)))
        if (stopping) return 'stopped'
      }
    }
  }

  /** False when the close grace ran out first (nothing more was applied). */
  async function applyWithRetry(ops: Op[]): Promise<boolean> {
    const results: Result[] = ops.map(o => failedResult(o.data))
    const events: EventEnvelope[] = []
    let finished = true
    try {
      const whole = await attempt(ops, results, events)
      if (whole === 'stopped') finished = false
      if (whole === 'refused') {
        // One refused row must not sink the others: one operation at a time.
        for (let i = 0; i < ops.length && !stopping; i++) {
          const one: Result[] = [results[i]!]
          const outcome = await attempt([ops[i]!], one, events)
          if (outcome === 'refused') stats.refused++
          if (outcome === 'stopped') finished = false
          results[i] = one[0]!
        }
        if (stopping) finished = false
      }
    } catch (err) {
      onError(errorCode(err)) // a bug in apply: report it, answer failure, keep the queue going
    }
    if (events.length > 0 && hub) {
      try {
        hub.emit('records', events)
      } catch (err) {
        onError(errorCode(err))
      }
    }
    ops.forEach((op, i) => op.done(results[i]!))
    return finished
  }

  async function flush(): Promise<void> {
    await cut()
    await lastBatch?.applied
  }

  return {
    upsertCall: (row, events) => enqueue<string | null>({ kind: 'call', row, events }),
    callEvent: cb => enqueue<boolean>({ kind: 'call-event', cb }),
    upsertSms: (row, effects) => enqueue<SmsClaim | null>({ kind: 'sms', row, effects }),
    markSmsForwarded: (id, forwardId, status, at, effects) => enqueue<boolean>({ kind: 'sms-forward', id, forwardId, status, at, effects }),
    updateSmsStatusByForwardId: (forwardId, status, deliveredAt = null) => enqueue<boolean>({ kind: 'sms-status', forwardId, status, deliveredAt }),
    flush,
    async sync() {
      await cut()
      const last = lastBatch
      if (!last || last.done) return
      if (!journal) return last.applied
      // Batches commit in order and journal lines are written in order: the last one committed or
      // on disk means every earlier one is too.
      journalExposed(exposed.length)
      await Promise.race([last.applied, last.journaled ?? last.applied])
    },
    async replay(batches) {
      for (const b of batches) {
        const ops = (b.ops as OpData[]).map(data => ({ data, done: () => {} }))
        stats.pending += ops.length
        held += ops.length
        let resolve!: () => void
        const applied = new Promise<void>(r => { resolve = r })
        // Still in the journal files it came from (deleted once it is applied): never exposed.
        const batch: Batch = { ops, count: ops.length, cutAt: performance.now(), entry: null, journaled: Promise.resolve(), done: false, applied, resolve }
        backlog.push(batch)
        lastBatch = batch
      }
      draining ??= drain().finally(() => { draining = null })
      await lastBatch?.applied
    },
    stats: () => ({ ...stats }),
    async close(graceMs = 10_000) {
      closed = true
      await cut()
      // What the grace below leaves undone must be on disk for the next boot.
      if (exposedTimer) clearTimeout(exposedTimer)
      exposedTimer = null
      journalExposed(exposed.length)
      const done = lastBatch?.applied ?? Promise.resolve()
      let timer: NodeJS.Timeout | undefined
      const late = new Promise<'late'>(r => { timer = setTimeout(() => r('late'), graceMs) })
      const outcome = await Promise.race([done.then(() => 'done' as const), late])
      clearTimeout(timer)
      if (outcome === 'late') {
        stopping = true
        await draining
      }
      await lastJournaled // its done mark first, so a drained journal is deleted, not replayed
      await journal?.close()
    },
  }
}
