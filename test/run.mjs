#!/usr/bin/env node
// The one test command (`npm test`, and `.ci/run` through it). Quality gates are tests
// (style 10): type-check, lint, a smoke run of the bench suite, then the node-tap suite twice, once against the real services
// (Postgres on 127.0.0.1:5432, Redis on 6379) and once on the embedded default (PGlite,
// in-process bus). Ends with the plain line `N passed, N failed`.
import { spawn } from 'node:child_process'
import { backendBound, testFiles } from './backend-files.mjs'

const pgUrl = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
const redisUrl = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379'
const only = process.argv.slice(2) // optional test files/dirs to narrow a local run

/**
 * Coverage only goes up. Each backend's whole-suite figures when the floor was set,
 * rounded down to a whole percent, less one point for the paths whose coverage depends on timing
 * (retries, races, reconnects). A run below a floor fails; raise the floors when coverage rises.
 * Set from the run of 291f29c, the first whose figures count the code run by tsx child processes
 * correctly (statements / branches / functions / lines): services 95.97 / 91.18 / 94.08 / 95.97 %,
 * embedded 95.37 / 90.68 / 93.63 / 95.37 %. (Earlier floors, 84-83 %, were set on figures that the
 * child processes' coverage merges had broken.)
 */
const COVERAGE_FLOOR = {
  services: { statements: 94, branches: 90, functions: 93, lines: 94 },
  // The embedded suite runs only the files that depend on the backend (test/backend-files.mjs), so
  // its floor guards the code those reach; the whole tree's floor is the services suite's, which
  // runs every file. Set from the first such run (2026-12-02: 90.46 / 79.51 / 85.79 / 90.46 %),
  // rounded down, less one point, as above.
  embedded: { statements: 89, branches: 78, functions: 84, lines: 89 },
}

/**
 * A percentage is only as good as what it counts: when the TypeScript loader's source maps lose the
 * source text, c8 counts one statement per file and reports 100 % (test/tap/typescript.mjs says
 * why tsx was not used). Each suite's report counted 17,479 statements at b5ad886; fewer than this
 * means the report, not the code, changed.
 */
const MIN_STATEMENTS_COUNTED = 15_000

let passed = 0
let failed = 0
const failures = []
/** Tests skipped for a missing service or binary, listed at the end of the run. */
const missingSkips = []
/** The failing assertions with their diagnostics, repeated at the end (see failedAssertions). */
const details = []

function run(cmd, args, env = {}) {
  return new Promise(resolve => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, ...env } })
    let out = ''
    child.stdout.on('data', d => { out += d; process.stdout.write(d) })
    child.on('close', code => resolve({ code, out }))
  })
}

async function gate(name, cmd, args) {
  console.log(`\n# gate: ${name}`)
  const { code } = await run(cmd, args)
  if (code === 0) passed++
  else { failed++; failures.push(name) }
}

async function suite(name, env, floor, files = only) {
  console.log(`\n# suite: ${name}`)
  // A narrowed run covers a part of the code: the floors hold for the whole suite only.
  const coverage = only.length ? [] : ['--no-allow-incomplete-coverage', ...Object.entries(floor).map(([k, v]) => `--${k}=${v}`)]
  const { code, out } = await run('npx', ['tap', '--reporter=tap', ...coverage, ...files], env)
  // tap prints a final summary such as `# { total: 120, pass: 118, fail: 2, skip: 0 }`
  const m = [...out.matchAll(/^# \{ total: (\d+), pass: (\d+)(?:, fail: (\d+))?(?:, skip: (\d+))?/gm)].at(-1)
  if (!m) { failed++; failures.push(`${name}: no summary (exit ${code})`); return }
  const total = Number(m[1]); const pass = Number(m[2]); const skip = Number(m[4] ?? 0); const fail = Number(m[3] ?? total - pass - skip)
  passed += pass
  failed += fail
  // A test skipped because a service or binary is missing here (test/support/missing.ts): listed,
  // and a failure on CI, which installs everything, so a test never silently stops running there.
  for (const m of out.matchAll(/^ *ok \d+ - (.*?) # SKIP (missing: .*)$/gm)) {
    missingSkips.push(`${name}: ${m[1]} (${m[2]})`)
    if (process.env.CI === 'true') { failed++; failures.push(`${name}: skipped on CI, ${m[2]}: ${m[1]}`) }
  }
  // tap still prints its coverage errors on a narrowed run (no floors passed): they judge nothing there.
  const below = only.length ? [] : [...out.matchAll(/^# ERROR: incomplete (\w+) coverage \(([\d.]+)%\)/gm)].map(m => `${m[1]} ${m[2]}% < ${floor[m[1]]}%`)
  const counted = Number(/^Statements\s*: [\d.]+% \( \d+\/(\d+) \)/m.exec(out)?.[1] ?? 0)
  if (!only.length && counted < MIN_STATEMENTS_COUNTED) below.push(`${counted} statements counted < ${MIN_STATEMENTS_COUNTED}`)
  if (below.length) { failed++; failures.push(`${name}: coverage below its floor (${below.join(', ')})`) }
  if (fail) {
    failures.push(`${name}: ${fail} failing (${failedTests(out).join(' | ')})`)
    details.push(`# ${name}:`, ...failedAssertions(out))
  }
  else if (code !== 0 && !below.length) { failed++; failures.push(`${name}: exit ${code}`) }
}

/**
 * The names of the failing tests (each file's failing tests, then the file in brackets), so the
 * last lines of a long CI log say which test failed: tap closes each subtest with its own line.
 */
function failedTests(out) {
  const names = []
  for (const m of out.matchAll(/^( *)not ok \d+ - (.*?)(?: # .*)?$/gm)) {
    if (m[1].length === 4) names.push(m[2]) // a test inside a file (the file itself is at depth 0)
    else if (m[1].length === 0) names.push(`[${m[2]}]`)
  }
  return names
}

/**
 * Each failing assertion inside a test (depth 8 and deeper) with the start of its YAML diagnostics
 * (found / wanted / at), so a CI log of which only the tail is kept still says what failed, not
 * only which test: the crash test once failed with nothing but its name left in such a tail.
 */
function failedAssertions(out, maxAssertions = 8, maxLines = 40) {
  const lines = out.split('\n')
  const picked = []
  let shown = 0
  for (let i = 0; i < lines.length && shown < maxAssertions; i++) {
    const m = /^( *)not ok \d+ - /.exec(lines[i])
    if (!m || m[1].length < 8) continue
    shown++
    picked.push(lines[i])
    // The diagnostics block: `---` … `...`, indented two more than the `not ok` line.
    if (lines[i + 1]?.trim() !== '---') continue
    let j = i + 1
    for (; j < lines.length && lines[j].trim() !== '...' && j - i <= maxLines; j++) picked.push(lines[j])
    if (j - i > maxLines) picked.push(`${m[1]}  (diagnostics cut at ${maxLines} lines)`)
  }
  return picked
}

if (!only.length) {
  await gate('types (tsc --noEmit)', 'npx', ['tsc', '--noEmit', '-p', '.'])
  await gate('lint (eslint)', 'npx', ['eslint', '.'])
  // CI proves the bench suite still runs (a short smoke; its figures are not judged).
  await gate('bench smoke (npm run bench -- --smoke)', 'npm', ['run', 'bench', '--silent', '--', '--smoke'])
}
// Every file runs on the real services; the embedded suite runs the files that depend on the
// backend (test/backend-files.mjs): the others would run the very same code a second time.
const bound = backendBound()
const embeddedFiles = testFiles(only.length ? only : ['test']).filter(bound)
console.log(`\n# ${embeddedFiles.length} test files depend on the backend and run on both; the others run once, on the real services`)
await suite('real Postgres + Redis', { TEST_DATABASE_URL: pgUrl, TEST_REDIS_URL: redisUrl, MASKLINE_TEST_BACKEND: 'services' }, COVERAGE_FLOOR.services)
if (embeddedFiles.length) await suite('embedded PGlite + in-process bus', { TEST_DATABASE_URL: '', TEST_REDIS_URL: '', MASKLINE_TEST_BACKEND: 'embedded' }, COVERAGE_FLOOR.embedded, embeddedFiles)

if (missingSkips.length) console.log(`\n# skipped for a missing service or binary (a failure when CI=true):\n${missingSkips.map(m => `#   ${m}`).join('\n')}`)
if (details.length) console.log(`\n# failing assertions, with the start of their diagnostics\n${details.join('\n')}`)
if (failures.length) console.log(`\n# failing: ${failures.join('; ')}`)
console.log(`${passed} passed, ${failed} failed`)
process.exit(failed ? 1 : 0)
