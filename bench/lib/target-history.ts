// A target met in one full run and missed in the next is reported with both runs, never dropped:
// a full run keeps its targets in bench/results/targets.json, and the next full run's target lines
// name the previous verdict wherever it differs, and list the targets it did not measure again.
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import type { TargetResult } from './results.js'

export interface TargetRun { date: string; revision: string; targets: TargetResult[] }

const key = (t: Pick<TargetResult, 'scenario' | 'text'>) => `${t.scenario}\u0000${t.text}`
const verdict = (met: boolean | null) => (met === null ? 'not measured' : met ? 'met' : 'not met')

export function readTargetRun(path: string): TargetRun | null {
  if (!existsSync(path)) return null
  const run = JSON.parse(readFileSync(path, 'utf8')) as TargetRun
  return Array.isArray(run.targets) ? run : null
}

export function writeTargetRun(path: string, run: TargetRun): void {
  writeFileSync(path, `${JSON.stringify(run, null, 2)}\n`)
}

/** What the previous run said of `t`, when its verdict was another: a tail for the target's line. */
export function previousVerdict(t: TargetResult, previous: TargetRun | null): string {
  const before = previous?.targets.find(p => key(p) === key(t))
  if (!before || before.met === t.met) return ''
  return `; previous full run (${previous!.date}, ${previous!.revision}): ${verdict(before.met)} (${before.detail})`
}

/** The previous run's targets that this run did not record at all (renamed or not run): kept, with their verdict. */
export function droppedTargets(current: readonly TargetResult[], previous: TargetRun | null): TargetResult[] {
  if (!previous) return []
  const now = new Set(current.map(key))
  return previous.targets.filter(p => !now.has(key(p)))
    .map(p => ({ ...p, met: null, detail: `not measured in this run; previous full run (${previous.date}, ${previous.revision}): ${verdict(p.met)} (${p.detail})` }))
}
