// The bench's reference notes: an absolute bar's target line names what a baseline of the same run
// did of that work, and says when that reference itself misses the bar. The note is reporting only:
// whether a target is met is still the bar's alone.
import t, { type Test } from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Results } from '../../bench/lib/results.js'
import { maxTarget, ratioTarget, referenceNote, verifyLoopBound, type Run } from '../../bench/lib/targets.js'

/** A run whose results already hold `figures` (name → value). */
function run(t: Test, figures: Record<string, number> = {}): Run {
  const dir = mkdtempSync(join(tmpdir(), 'maskline-reference-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const results = new Results(join(dir, 'run.jsonl'), {})
  for (const [name, value] of Object.entries(figures)) results.figure(name, value, 'x')
  return { results }
}

t.test('a reference past the bar says so, and the target stays decided by the bar', t => {
  const ctx = run(t, { 'voice.none.cpu_per_req.service': 56.18, 'baseline.record_ceiling.cpu_per_req.service': 32.9 })
  maxTarget(ctx, 's', 'service CPU ≤ 30 µs', 'voice.none.cpu_per_req.service', 30, ' µs',
    { figure: 'baseline.record_ceiling.cpu_per_req.service', what: "the record ceiling's own process" })
  const [target] = ctx.results.targets
  t.equal(target?.met, false)
  t.equal(target?.detail, "voice.none.cpu_per_req.service = 56.18 µs, needs ≤ 30 µs; in this run, the record ceiling's own process: 32.9 µs, which misses the bar too")
  t.end()
})

t.test('a reference within the bar is named without the verdict; a met target stays met', t => {
  const ctx = run(t, { 'voice.none.cpu_per_req.postgres': 24, 'baseline.record_ceiling.cpu_per_req.postgres': 21.5 })
  maxTarget(ctx, 's', 'Postgres CPU ≤ 25 µs', 'voice.none.cpu_per_req.postgres', 25, ' µs',
    { figure: 'baseline.record_ceiling.cpu_per_req.postgres', what: 'Postgres under the record ceiling' })
  const [target] = ctx.results.targets
  t.equal(target?.met, true)
  t.match(target?.detail, /; in this run, Postgres under the record ceiling: 21\.5 µs$/)
  t.end()
})

t.test('a "≥" bar: a bound under it misses the bar too', t => {
  const ctx = run(t, { 'voice.ed25519.vs_verify_loop': 0.43, 'voice.ed25519.vs_verify_loop.bound': 0.71 })
  ratioTarget(ctx, 's', 'throughput ≥ 80 % of the verify loop', 'voice.ed25519.vs_verify_loop', 0.8,
    { figure: 'voice.ed25519.vs_verify_loop.bound', what: 'the most that one verify plus the record ceiling\'s CPU per call allow' })
  const [target] = ctx.results.targets
  t.equal(target?.met, false)
  t.equal(target?.detail, "voice.ed25519.vs_verify_loop = 0.43, needs ≥ 0.8; in this run, the most that one verify plus the record ceiling's CPU per call allow: 0.71, which misses the bar too")
  t.end()
})

t.test('no reference measured: no note', t => {
  const ctx = run(t)
  t.equal(referenceNote(ctx, { figure: 'fanout.loopback_floor', what: 'x' }, f => f > 5_000, ' µs'), '')
  maxTarget(ctx, 's', 'p99 ≤ 2 ms', 'rest.get_session.p99', 2_000, ' µs', { figure: 'baseline.hello.p99', what: 'hello' })
  t.equal(ctx.results.targets[0]?.detail, 'rest.get_session.p99 not measured')
  t.end()
})

t.test('the Ed25519 bound: a verify plus the record ceiling\'s CPU per call on one core', t => {
  // The 526f206 run of 2026-11-29: 9,051 verifies/s and 52.5 µs a call gave "at most ~0.68".
  t.equal(Math.round(verifyLoopBound(9_051, 52.5) * 1000) / 1000, 0.678)
  t.equal(verifyLoopBound(10_000, 0), 1, 'a free recorded call leaves the verify loop whole')
  t.equal(verifyLoopBound(10_000, 100), 0.5, 'a call costing one verify halves it')
  t.end()
})
