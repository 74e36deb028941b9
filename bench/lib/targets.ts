// The targets as the scenarios record them: "≥ ratio" and "≤ max" bars read from figures
// already reported, and the same run's floor under an absolute bar (what that bar's work costs at
// the least on this machine), named in the target's line.
import type { Results } from './results.js'

/** What the target helpers read of a scenario's context (bench/scenarios/common.ts Ctx): the run's results. */
export interface Run { results: Results }

/** Records a "≥ ratio" target from two figures already reported. */
export function ratioTarget(run: Run, scenario: string, text: string, figure: string, min: number): void {
  const v = run.results.get(figure)
  run.results.target(scenario, text, v === undefined ? null : v >= min, v === undefined ? `${figure} not measured` : `${figure} = ${v.toFixed(2)}, needs ≥ ${min}`)
}

/**
 * The least a bar's work costs on this machine, measured in the same run (the record ceiling's own
 * process, hello's p99, the loopback write floor): `figure` names it, `what` says what it is.
 */
export interface Floor { figure: string; what: string }

/**
 * A target detail's tail naming the same run's floor, and saying so where the floor alone misses the
 * bar (`misses`): then no change to the service can meet that bar in this run. Empty when the
 * floor was not measured. It never changes whether a target is met.
 */
export function floorNote(run: Run, floor: Floor, misses: (value: number) => boolean, unit = ''): string {
  const v = run.results.get(floor.figure)
  if (v === undefined) return ''
  return `; floor in this run: ${floor.what} ${Math.round(v * 100) / 100}${unit}${misses(v) ? ', itself out of the bar\'s reach' : ''}`
}

/**
 * The best share of the Ed25519 verify loop a verified, recorded call can reach: one verify plus the
 * record ceiling's own work per call on the one core, 1 / (1 + verifies per second × the ceiling's
 * CPU seconds per call).
 */
export function verifyLoopBound(verifiesPerS: number, ceilingUsPerCall: number): number {
  return 1 / (1 + verifiesPerS * ceilingUsPerCall / 1e6)
}

/** Records a "≤ max" target from a figure already reported, with the same run's floor when one is given. */
export function maxTarget(run: Run, scenario: string, text: string, figure: string, max: number, unit = '', floor?: Floor): void {
  const v = run.results.get(figure)
  const below = floor ? floorNote(run, floor, f => f > max, unit) : ''
  run.results.target(scenario, text, v === undefined ? null : v <= max, v === undefined ? `${figure} not measured` : `${figure} = ${Math.round(v * 100) / 100}${unit}, needs ≤ ${max}${unit}${below}`)
}
