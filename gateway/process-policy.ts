// What the process does when something escapes every handler (issue 14). Every background promise
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
