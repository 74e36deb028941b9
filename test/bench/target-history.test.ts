// A target met in one full run and missed in the next is reported with both runs: the report's
// line names the previous verdict where it differs, and a previous target not run again is kept.
import t from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { droppedTargets, previousVerdict, readTargetRun, writeTargetRun, type TargetRun } from '../../bench/lib/target-history.js'

const previous: TargetRun = {
  date: '2026-12-01', revision: 'a86620e',
  targets: [
    { scenario: '3. SMS', text: 'forward delay p99 ≤ 1 s', met: true, detail: 'delay p99 360 ms' },
    { scenario: '5. token', text: 'throughput ≥ 20 % of hello', met: false, detail: '0.13' },
    { scenario: '9. gone', text: 'a bar this run did not measure', met: true, detail: 'x' },
  ],
}

t.test('a verdict that changed names the previous run; an unchanged one adds nothing', async t => {
  t.equal(previousVerdict({ scenario: '3. SMS', text: 'forward delay p99 ≤ 1 s', met: false, detail: 'delay p99 1.9 s' }, previous),
    '; previous full run (2026-12-01, a86620e): met (delay p99 360 ms)')
  t.equal(previousVerdict({ scenario: '5. token', text: 'throughput ≥ 20 % of hello', met: false, detail: '0.12' }, previous), '')
  t.equal(previousVerdict({ scenario: 'new', text: 'new bar', met: true, detail: '' }, previous), '')
  t.equal(previousVerdict({ scenario: '3. SMS', text: 'forward delay p99 ≤ 1 s', met: false, detail: '' }, null), '')
})

t.test('a previous target this run did not record is listed as not measured, with its verdict', async t => {
  const dropped = droppedTargets([{ scenario: '3. SMS', text: 'forward delay p99 ≤ 1 s', met: true, detail: '' },
    { scenario: '5. token', text: 'throughput ≥ 20 % of hello', met: true, detail: '' }], previous)
  t.same(dropped, [{ scenario: '9. gone', text: 'a bar this run did not measure', met: null,
    detail: 'not measured in this run; previous full run (2026-12-01, a86620e): met (x)' }])
  t.same(droppedTargets([], null), [])
})

t.test('the run is kept as JSON and read back; a missing file is no previous run', async t => {
  const dir = mkdtempSync(join(tmpdir(), 'maskline-targets-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const path = join(dir, 'targets.json')
  t.equal(readTargetRun(path), null)
  writeTargetRun(path, previous)
  t.same(readTargetRun(path), previous)
})

t.test('the committed last full run parses', async t => {
  const run = readTargetRun(join(import.meta.dirname, '..', '..', 'bench', 'results', 'targets.json'))
  t.ok(run && run.targets.length > 0 && run.targets.every(x => x.scenario && x.text && 'met' in x))
})
