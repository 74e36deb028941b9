// Keeps a node's engine equal to Postgres, the source of truth, when it runs beside other nodes
// (docs/scaling.md). Two ways in:
// - reload(id, version): a bus message says another node committed this version. Reloads of one
//   session run one at a time (a message arriving meanwhile reloads once more afterwards), and
//   none is started for a version memory already holds. Whatever order the reads come back in,
//   engine.load() keeps the newer version (a live session by its version, a session that left
//   memory by its tombstone), so an older state never replaces a newer one.
//   pending(id) says when the reload under way is done (the events of that change wait for it
//   before this node's WebSocket clients get them, gateway/event-order.ts).
// - sweep(): the sessions whose version changed since the last sweep's watermark (migration 006:
//   a transaction-id watermark, exact whatever the commit order) are compared with memory as
//   (id, version, state), and only those that differ are read in full and loaded. It runs every
//   SWEEP_MS, at once when the bus reports a gap (a Redis reconnect, a trimmed stream), and again
//   a little later (a publisher that reconnected after us still had changes in its offline queue
//   or lost them). A sweep that could not finish (Postgres away) keeps its watermark, so the next
//   one reads the same changes and more: nothing is skipped, a node without Redis or Postgres
//   keeps routing from memory and catches up when they return.
// Nothing here reads or logs a phone number; the bus carries ids and versions only.
import type { Logger } from 'pino'
import type { Engine, SessionExtras } from '../../engine/index.js'
import { LIVE_STATES, type SessionId, type SessionRecord } from '../../engine/types.js'
import type { Db } from '../../sql/transaction.js'
import { getLiveSessionState, getLiveSessionStates, type SessionCipher } from '../../sql/session-load.js'
import { sessionChangesSince } from '../../sql/session-changes.js'
import { StoreError } from '../../sql/errors.js'
import type { TenantDirectory } from './tenant-directory.js'

export const SWEEP_MS = 30_000
/** After a gap, one more sweep this much later (publishers still reconnecting). */
const TRAILING_SWEEP_MS = 3_000
const LOAD_BATCH = 500
const CLOSE_WAIT_MS = 1_000

export interface ReconcilerDeps {
  db: Db
  engine: Engine
  tenants: Pick<TenantDirectory, 'peek' | 'refresh'>
  cipher: SessionCipher
  log: Logger
  sweepMs?: number
  /**
   * Other in-memory sets kept equal to Postgres the same way, swept after the sessions on every
   * sweep (contract D11: the SMS opt-outs, api/cpaas/sms/opt-out.ts). Each keeps its own watermark
   * and throws when Postgres is away, which fails the sweep like a session read does.
   */
  alsoSweep?: ReadonlyArray<() => Promise<unknown>>
}

export interface SweepResult { changed: number; loaded: number; ms: number }

/** Sweeps nothing until `start()` gives it the watermark the boot load was read at. */
export function createReconciler(d: ReconcilerDeps) {
  let since = ''
  const sweepMs = d.sweepMs ?? SWEEP_MS
  /** Sessions with a reload running: `again` when asked again meanwhile (reload once more), `done` settles when it ends. */
  const reloading = new Map<string, { again: boolean; done: Promise<void> }>()
  let sweeping: Promise<SweepResult | null> | null = null
  let again = false
  let closed = false
  const timers = new Set<NodeJS.Timeout>()

  async function apply(rec: SessionRecord, extras: SessionExtras) {
    if (!d.tenants.peek(rec.tenantId)) await d.tenants.refresh(rec.tenantId) // a tenant created on another node
    d.engine.load(rec, extras)
  }

  function heldVersion(id: string): number {
    return d.engine.get(id as SessionId)?.version ?? 0
  }

  async function reloadLoop(id: string, run: { again: boolean }) {
    try {
      do {
        run.again = false
        const state = await getLiveSessionState(d.db, id, d.cipher)
        if (state) await apply(state.rec, state.extras)
      } while (run.again)
    } catch {
      // The sweep reads this change again (its watermark stays below it until a sweep succeeds).
      d.log.warn({ code: 'bus-reload' }, 'recoverable error')
    } finally {
      reloading.delete(id)
    }
  }

  /** One read of the changes since the watermark, and the loads that memory lacks. */
  async function sweepOnce(): Promise<SweepResult> {
    const t0 = performance.now()
    const { changes, next } = await sessionChangesSince(d.db, since)
    const stale: string[] = []
    for (const c of changes) {
      const held = d.engine.get(c.id as SessionId)
      if (LIVE_STATES.includes(c.state) ? (held === undefined || held.version < c.version) : held !== undefined) stale.push(c.id)
    }
    for (let i = 0; i < stale.length; i += LOAD_BATCH) {
      for (const s of await getLiveSessionStates(d.db, stale.slice(i, i + LOAD_BATCH), d.cipher)) {
        try {
          await apply(s.rec, s.extras)
        } catch (err) {
          if (err instanceof StoreError) throw err // Postgres away: retry the whole window
          d.log.warn({ code: 'reconcile-load', sessionId: s.rec.id }, 'recoverable error') // a record the engine refuses
        }
      }
    }
    since = next // only once every load of the window succeeded
    for (const also of d.alsoSweep ?? []) await also()
    const ms = Math.round(performance.now() - t0)
    if (stale.length > 0) d.log.info({ changed: changes.length, loaded: stale.length, ms }, 'reconciled')
    return { changed: changes.length, loaded: stale.length, ms }
  }

  /** Sweeps now; one asked for while one runs runs after it (it may have read too early). */
  function sweep(): Promise<SweepResult | null> {
    if (closed) return Promise.resolve(null)
    if (sweeping) { again = true; return sweeping }
    const run = (async () => {
      let res: SweepResult | null
      do {
        again = false
        try {
          res = await sweepOnce()
        } catch {
          d.log.warn({ code: 'reconcile-sweep' }, 'recoverable error')
          res = null
        }
      } while (again && !closed)
      return res
    })()
    sweeping = run
    void run.finally(() => { if (sweeping === run) sweeping = null })
    return run
  }

  function later(ms: number) {
    const t = setTimeout(() => { timers.delete(t); void sweep() }, ms)
    t.unref()
    timers.add(t)
  }

  let periodic: NodeJS.Timeout | undefined

  return {
    /** `watermark`: taken before the boot load read the sessions (sessionChangeWatermark); sweeps every `sweepMs` from then. */
    start(watermark: string): void {
      since = watermark
      periodic = setInterval(() => void sweep(), sweepMs)
      periodic.unref()
    },
    /** A bus message: another node committed `version` of this session. */
    reload(id: string, version: number): void {
      if (closed || heldVersion(id) >= version) return // held already: idempotent
      const running = reloading.get(id)
      if (running) { running.again = true; return }
      const run = { again: false, done: Promise.resolve() }
      reloading.set(id, run)
      run.done = reloadLoop(id, run) // never rejects
    },
    /** Settles when the reload of this session under way ends (loaded, or failed and logged); null: none runs. */
    pending(id: string): Promise<void> | null {
      return reloading.get(id)?.done ?? null
    },
    sweep,
    /** The bus may have lost messages: reconcile now, and once more shortly. */
    gap(reason: string): void {
      d.log.info({ reason }, 'bus gap: reconciling from Postgres')
      void sweep()
      later(TRAILING_SWEEP_MS)
    },
    /** The current watermark (tests). */
    get watermark() { return since },
    async close(): Promise<void> {
      closed = true
      clearInterval(periodic)
      for (const t of timers) clearTimeout(t)
      // A sweep hung on an unreachable Postgres must not hold the shutdown up (its result is moot).
      await Promise.race([sweeping, new Promise(r => setTimeout(r, CLOSE_WAIT_MS).unref())])
    },
  }
}

export type Reconciler = ReturnType<typeof createReconciler>
