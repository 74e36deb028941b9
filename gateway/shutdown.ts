// Shutdown as a stack: each part of the service defers its own stop as it is built, and the stops
// run last-built first, so nothing is stopped while a part built on it still runs. A step that
// throws is logged by its owner or ignored here; it never keeps the later steps from running.

export interface ShutdownStack {
  /** Runs `step` at shutdown, before every step deferred earlier. */
  defer(step: () => unknown): void
  /** Runs every step once, last deferred first; resolves when all have settled. */
  run(): Promise<void>
}

export function createShutdownStack(): ShutdownStack {
  const steps: Array<() => unknown> = []
  let running: Promise<void> | null = null
  return {
    defer(step) {
      if (running) throw new Error('shutdown already under way')
      steps.push(step)
    },
    run() {
      return (running ??= (async () => {
        for (let step = steps.pop(); step; step = steps.pop()) {
          try { await step() } catch { /* keep stopping the rest */ }
        }
      })())
    },
  }
}

/** `fn` run at most once: its first call's promise is every call's (a stop reached from two places). */
export function once<T>(fn: () => Promise<T>): () => Promise<T> {
  let p: Promise<T> | null = null
  return () => (p ??= fn())
}
