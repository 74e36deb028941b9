// The targets as the scenarios record them: "≥ ratio" and "≤ max" bars read from figures
// already reported, and under an absolute bar the same run's reference for it (the same work done
// by a baseline, or bounded by one), named in the target's line.
import type { Results } from './results.js'

/** What the target helpers read of a scenario's context (bench/scenarios/common.ts Ctx): the run's results. */
export interface Run { results: Results }

/**
 * What a baseline of the same run did of an absolute bar's work (the record ceiling's own process,
 * hello at the same connections, the loopback write floor): `figure` names it, `what` says what it
 * is. A reference, not a proof: a baseline's per-request CPU and its latencies move with its own
 * rate and the machine's phase, and the service has beaten the ceiling's CPU per call in a run where
 * the ceiling ran slower (b1af6ed's full run: 98 µs a call against the ceiling's 116).
 */
export interface Reference { figure: string; what: string }

/**
 * A target detail's tail naming the same run's reference, and saying so where the reference itself
 * misses the bar (`misses`). Empty when it was not measured. It never changes whether a target is met.
 */
export function referenceNote(run: Run, ref: Reference, misses: (value: number) => boolean, unit = ''): string {
  const v = run.results.get(ref.figure)
  if (v === undefined) return ''
  return `; in this run, ${ref.what}: ${Math.round(v * 100) / 100}${unit}${misses(v) ? ', which misses the bar too' : ''}`
}

/** Records a "≥ ratio" target from a figure already reported, with the same run's reference when one is given. */
export function ratioTarget(run: Run, scenario: string, text: string, figure: string, min: number, ref?: Reference): void {
  const v = run.results.get(figure)
  const note = ref ? referenceNote(run, ref, r => r < min) : ''
  run.results.target(scenario, text, v === undefined ? null : v >= min, v === undefined ? `${figure} not measured` : `${figure} = ${v.toFixed(2)}, needs ≥ ${min}${note}`)
}

/** Records a "≤ max" target from a figure already reported, with the same run's reference when one is given. */
export function maxTarget(run: Run, scenario: string, text: string, figure: string, max: number, unit = '', ref?: Reference): void {
  const v = run.results.get(figure)
  const note = ref ? referenceNote(run, ref, f => f > max, unit) : ''
  run.results.target(scenario, text, v === undefined ? null : v <= max, v === undefined ? `${figure} not measured` : `${figure} = ${Math.round(v * 100) / 100}${unit}, needs ≤ ${max}${unit}${note}`)
}

/**
 * The best share of the Ed25519 verify loop a verified, recorded call can reach: one verify plus the
 * record ceiling's own work per call on the one core, 1 / (1 + verifies per second × the ceiling's
 * CPU seconds per call).
 */
export function verifyLoopBound(verifiesPerS: number, ceilingUsPerCall: number): number {
  return 1 / (1 + verifiesPerS * ceilingUsPerCall / 1e6)
}
