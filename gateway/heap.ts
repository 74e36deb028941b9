// A full garbage collection on demand, for the one moment it pays: the end of the boot.
// Building a million sessions leaves the boot's decode garbage interleaved with them in the old
// generation, and V8's first mark-compact of that ~600 MB heap came seconds into serving: on the
// service's one core it held the event loop ~1.5 s (61 % of that window in the collector), the
// SMS answers' and forwards' p99 1.2 s in the bench. Collected before listening, it costs the boot
// 0.5-1 s at a million sessions and nothing later (bench/RESULTS.md, "What moved the figures", 916a189).
// `gc` exists only under --expose-gc: the flag is turned on for one new context, which hands the
// function over, and off again, so the application's own realm never gets a global `gc`.
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'

let gc: (() => void) | null = null

/** Runs a full, compacting collection now; returns the milliseconds it took. */
export function collectGarbage(): number {
  if (!gc) {
    setFlagsFromString('--expose-gc')
    gc = runInNewContext('gc') as () => void
    setFlagsFromString('--no-expose-gc')
  }
  const t = performance.now()
  gc()
  return performance.now() - t
}
