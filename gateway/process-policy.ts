// What the process does when something escapes every handler. Every background promise
// of ours settles by construction (the record writer, the dispatcher, the sweeps catch and count
// their failures), so reaching these handlers is a bug — but not the same kind:
// - an unhandled rejection is one promise nobody awaited: logged as an error with its stack and
//   counted, and the process keeps serving (Node 20 would otherwise exit and drop every live
//   call's routing for a bug in one background task);
// - an uncaught exception may have left any state half-changed: logged as fatal, then the service
//   is closed within a short grace (what the record writer holds goes to its journal, replayed at
//   the next boot) and the process exits 1 for its supervisor to restart it.
import type { Logger } from 'pino'

export interface ProcessLike {
  on(event: 'unhandledRejection', fn: (reason: unknown) => void): unknown
  on(event: 'uncaughtException', fn: (err: Error) => void): unknown
}

export interface SignalProcess {
  on(event: 'SIGTERM' | 'SIGINT', fn: (signal: NodeJS.Signals) => void): unknown
}

/**
 * SIGTERM and SIGINT (docs/operations.md): the graceful stop, once. `close` is RunningService.close()
 * (readiness 503 and the listener closed at once, requests in flight finish within the grace, then
 * webhook attempts, the record writer and the bus); exit 0 when it completes, 1 when it fails or
 * overruns `deadlineMs` (the supervisor's SIGKILL would come next anyway; the journal keeps what
 * the writer still held). A second signal while stopping changes nothing.
 */
export function installShutdown(proc: SignalProcess, o: { log: Logger; close: () => Promise<void>; exit: (code: number) => void; deadlineMs: number }): { readonly stopping: boolean } {
  const state = { stopping: false }
  const stop = (signal: NodeJS.Signals) => {
    if (state.stopping) { o.log.info({ signal }, 'already shutting down'); return }
    state.stopping = true
    o.log.info({ signal }, 'shutting down')
    const timer = setTimeout(() => { o.log.error({ code: 'shutdown-deadline', ms: o.deadlineMs }, 'shutdown overran its deadline; exiting'); o.exit(1) }, o.deadlineMs)
    timer.unref()
    o.close().then(
      () => { clearTimeout(timer); o.exit(0) },
      err => { clearTimeout(timer); o.log.error({ code: 'shutdown-failed', error: err }, 'shutdown failed'); o.exit(1) },
    )
  }
  proc.on('SIGTERM', stop)
  proc.on('SIGINT', stop)
  return state
}

export interface ProcessPolicy {
  /** Unhandled rejections seen since start. */
  readonly unhandled: number
}

export function installProcessPolicy(proc: ProcessLike, o: { log: Logger; close: () => Promise<void>; exit: (code: number) => void; graceMs?: number }): ProcessPolicy {
  const state = { unhandled: 0 }
  let dying = false
  proc.on('unhandledRejection', reason => {
    state.unhandled++
    o.log.error({ code: 'unhandled-rejection', error: reason, count: state.unhandled }, 'unhandled rejection (a bug); still serving')
  })
  proc.on('uncaughtException', err => {
    o.log.fatal({ code: 'uncaught-exception', error: err }, 'uncaught exception (a bug); closing and exiting')
    if (dying) return
    dying = true
    const timer = setTimeout(() => o.exit(1), o.graceMs ?? 3_000)
    timer.unref()
    o.close().then(() => o.exit(1), () => o.exit(1))
  })
  return state
}
