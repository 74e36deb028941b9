// `npm run bench`: drives the real service over loopback and reports how close it gets to what
// this machine can do, as ratios against baselines measured in the same run (style 8).
//
//   node --expose-gc --import tsx bench/run.ts [--smoke] [--profile] [--sessions N] [--only a,b] [--duration s] [--connections N]
//
// Steps (--only picks scenarios; the baselines they are compared with come along):
//   baselines  hello, callback-uws, fastify (bench/baselines/), verify (Ed25519 loop), insert (INSERT loop),
//              record-ceiling (bench/baselines/record-ceiling.ts: callback work + call and outbox rows through raw pg)
//   scenarios  voice (1), ed25519 (2), sms (3), create (4), read (5), memory (6), fanout (7), facade (8)
//   optional   two-node (bench/scenarios/cluster.ts; REDIS_URL and DATABASE_URL): not in a full run, only
//              through --only (and --smoke, where it skips without them); login-flood
//              (bench/scenarios/login-flood.ts): only through --only;
//              soak (bench/scenarios/soak.ts): two nodes on a private Postgres and Redis for --minutes N (default 30)
//              at --rate-scale x of its mix (default 1), only through --only
// Servers run as child processes on core 1, wrk (or autocannon) on core 0, when taskset and two
// cores exist. Output: `# …` progress, `bench: <name> <value> <unit>` per figure,
// bench/results/<stamp>.jsonl, bench/results/latest.md (with the latency chart) and the
// "## Bench suite" section of bench/RESULTS.md (a full run only: --smoke writes bench/results/smoke.md, a partial run partial.md). Exit 0 unless a step that could run failed.
import { execFileSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { sql } from 'slonik'
import { generateTelnyxKeyPair } from '../test/support/callback-driver.js'
import { BASELINE_IDS, parseArgs, SCENARIO_IDS, UsageError, type Options, type StepId } from './lib/args.js'
import { createBenchDatabase, type BenchDatabase } from './lib/database.js'
import { describeMachine, detectPinning, findLoadGenerator, gitRevision, pinLocalPostgres } from './lib/machine.js'
import { loadPopulation, planPopulation, type Loaded } from './lib/population.js'
import { updateResultsSection, writeLatest, type RunInfo } from './lib/report.js'
import { readTargetRun, writeTargetRun } from './lib/target-history.js'
import { profileIn, profileMarkdown, summarizeProfile, type ProfileWindow } from './lib/profile.js'
import { progress, Results } from './lib/results.js'
import { latencyChart } from './lib/svg-chart.js'
import { baselineCallbackUws, baselineFastify, baselineHello, baselineInsert, baselineRecordCeiling, baselineVerify, type VoiceFiles } from './scenarios/baselines.js'
import type { Ctx, Keys } from './scenarios/common.js'
import { twoNodeScenario, twoNodeSkip } from './scenarios/cluster.js'
import { fanoutScenario, fanoutThroughput } from './scenarios/fanout.js'
import { loginFloodScenario } from './scenarios/login-flood.js'
import { twilioProxyScenario } from './scenarios/twilio-proxy.js'
import { bootFigures, engineHeap } from './scenarios/memory.js'
import { createScenario, fetchTokens, readScenario } from './scenarios/rest.js'
import { ensureServiceBuilt, serviceEntry, startService, type Service, type ServiceConfig } from './scenarios/service.js'
import { soakScenario } from './scenarios/soak.js'
import { smsScenario, startSmsProbe, type SmsProbe } from './scenarios/sms.js'
import { voiceFiles, voiceScenario } from './scenarios/voice.js'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
process.chdir(ROOT)

let opts: Options
try {
  opts = parseArgs(process.argv.slice(2))
} catch (err) {
  if (!(err instanceof UsageError)) throw err
  console.error(`bench: ${err.message}`)
  process.exit(2)
}

const started = Date.now()
const stamp = new Date(started).toISOString().replace(/[:.]/g, '-')
const machine = describeMachine()
const pin = detectPinning()
const gen = findLoadGenerator(progress)
const pop = planPopulation(opts.sessions, opts.duration)
const databaseUrl = process.env.DATABASE_URL || undefined
const info: RunInfo = {
  date: new Date(started).toISOString(),
  command: opts.command,
  machine,
  revision: gitRevision(),
  loadGenerator: `${gen.kind} ${gen.version} (${gen.how})`,
  pinning: pin.why,
  database: databaseUrl ? 'real Postgres (DATABASE_URL)' : 'embedded PGlite (no DATABASE_URL)',
  redis: process.env.REDIS_URL ? 'REDIS_URL' : 'none (in-process bus)',
  population: `${pop.sessions.toLocaleString('en')} live sessions on ${pop.proxies.toLocaleString('en')} proxy numbers, ${pop.tenants} ENTERPRISE tenants`,
  load: `${opts.duration} s per run after ${opts.warmup} s warm-up, ${opts.connections} connections, 1 load thread; unloaded runs: 1 connection, ${opts.unloadedDuration} s`,
  service: 'not started',
  loadAverage: `${loadavg()[0]!.toFixed(1)} at the start`,
  durationS: 0,
}
const resultsDir = join(ROOT, 'bench', 'results')
mkdirSync(resultsDir, { recursive: true })
// Service logs of a 1M run are megabytes: keep those of the last few runs only (JSON lines stay).
const logStamps = [...new Set(readdirSync(resultsDir).filter(f => f.endsWith('.log')).map(f => f.slice(0, 24)))].sort()
for (const old of logStamps.slice(0, -4)) for (const f of readdirSync(resultsDir)) if (f.startsWith(old) && f.endsWith('.log')) rmSync(join(resultsDir, f))
const results = new Results(join(resultsDir, `${stamp}.jsonl`), { ...info, smoke: opts.smoke, steps: [...opts.steps] })

progress(`maskline bench${opts.smoke ? ' (smoke)' : ''}: ${info.population}`)
progress(`machine: ${machine.cpuModel}, ${machine.cores} cores, ${machine.memoryGiB} GiB; node ${machine.node}; load average ${loadavg()[0]!.toFixed(1)}`)
if (loadavg()[0]! > machine.cores / 2) results.note(`the machine was busy at the start (1-minute load average ${loadavg()[0]!.toFixed(1)} on ${machine.cores} cores): absolute figures are low, ratios against the same-run baselines less so`)
progress(`load generator: ${info.loadGenerator}`)
// Measured at ac36f5f: the same revision spent 114 µs of service CPU per token profiled and
// 49 unprofiled, 89 against 48-61 per recorded call, +152 against +19-23 µs unloaded over hello.
if (opts.profile) results.note('--profile: every service ran under V8\'s sampling profiler, which costs it CPU and latency (up to 2x the CPU per request measured here): read the profiles\' shares; take the figures and targets from a run without --profile')
if (gen.kind === 'autocannon') results.note('autocannon records latency in whole milliseconds: sub-millisecond percentiles read as 0 or 1 ms, and the "+20 µs" bar cannot be judged')
progress(`pinning: ${pin.why}`)
progress(`load: ${info.load}`)
progress(`steps: ${[...opts.steps].join(', ')}`)

const telnyx = generateTelnyxKeyPair()
const keys: Keys = {
  telnyx,
  telnyxPrivatePem: telnyx.privateKey.export({ format: 'pem', type: 'pkcs8' }) as string,
  hmacSecret: randomBytes(24).toString('base64url'),
  jwtSecret: randomBytes(48).toString('base64url'),
  phoneKey: randomBytes(32).toString('base64'),
}
const work = mkdtempSync(join(tmpdir(), 'maskline-bench-req-'))
const ctx: Ctx = { opts, pin, gen, results, work, logPrefix: join(resultsDir, stamp), pop, keys }
const has = (s: StepId) => opts.steps.has(s)
let failures = 0

/** Runs one step; a failure is reported and the run goes on with the next step. */
async function step(name: string, fn: () => Promise<void>): Promise<void> {
  try {
    await fn()
  } catch (err) {
    failures++
    results.skip(name, `failed: ${(err as Error).message.split('\n').slice(0, 12).join(' | ')}`)
  }
}

// 1. Baselines without a database. They (and the record ceiling) replay one request file.
let baselineVoice: VoiceFiles | null = null
const voice = (): VoiceFiles => (baselineVoice ??= voiceFiles(ctx, 'none', 'http://127.0.0.1', 'baseline'))
if (has('hello')) await step('hello', () => baselineHello(ctx, voice()))
if (has('callback-uws')) await step('callback-uws', () => baselineCallbackUws(ctx, voice()))
if (has('fastify')) await step('fastify', () => baselineFastify(ctx, voice()))
if (has('verify')) await step('verify', () => baselineVerify(ctx))

// 2. The database: INSERT-loop and record-ceiling baselines (on an empty database: the ceiling's
// rows are in its own scratch tables), then the population, then the service scenarios.
// two-node (docs/scaling.md) needs Redis and a real Postgres: without them it is skipped here, before a
// database and a population are made for it.
const twoNodeWhyNot = has('two-node') ? twoNodeSkip(databaseUrl) : null
if (twoNodeWhyNot) results.skip('two-node', twoNodeWhyNot)
const serviceSteps = (['voice', 'ed25519', 'sms', 'create', 'read', 'fanout', 'memory', 'two-node'] as const).filter(s => has(s) && !(s === 'two-node' && twoNodeWhyNot))
let db: BenchDatabase | null = null
let pgPin: ReturnType<typeof pinLocalPostgres> = null
try {
  if (has('insert') || has('record-ceiling') || serviceSteps.length) {
    db = await createBenchDatabase(databaseUrl)
    progress(`database: ${db.label}`)
    if (databaseUrl && serviceSteps.length) {
      pgPin = pinLocalPostgres(pin, databaseUrl)
      if (pgPin) { progress(pgPin.why); info.pinning += `; ${pgPin.why}` }
    }
    if (!databaseUrl && has('create')) progress('scenario 4 runs on embedded PGlite here; its bar is set for real Postgres: set DATABASE_URL for that figure')
  }
  if (db && has('insert')) await step('insert', () => baselineInsert(ctx, db!))
  if (db && has('record-ceiling')) await step('record-ceiling', () => baselineRecordCeiling(ctx, db!, voice()))
  if (db && serviceSteps.length) await serviceScenarios(db)
} catch (err) {
  failures++
  results.skip('database', `failed: ${(err as Error).message.split('\n')[0]}`)
} finally {
  pgPin?.restore()
  await db?.dispose().catch(() => {})
}
if (has('memory')) await step('memory (engine heap)', () => engineHeap(ctx))
if (has('fanout')) await step('fanout (stream ceiling)', () => fanoutThroughput(ctx))
if (has('facade')) await step('facade (Twilio Proxy façade vs native)', () => twilioProxyScenario(ctx))
if (has('login-flood')) await step('login-flood', () => loginFloodScenario(ctx))
if (has('soak')) await step('soak', () => soakScenario(ctx, opts.minutes, opts.rateScale))

/** --profile: one summary per loaded run from the profile the service wrote when it stopped. */
function profiles(dir: string, windows: readonly ProfileWindow[]): void {
  const file = profileIn(dir)
  if (!file) { results.note(`--profile: no .cpuprofile in ${dir} (did the service exit cleanly?)`); return }
  for (const s of summarizeProfile(file, windows)) {
    progress(`profile ${s.name}: busy ${(s.busyShare * 100).toFixed(0)} %; ${s.parts.slice(0, 6).map(p => `${p.what} ${(p.share * 100).toFixed(0)} %`).join(', ')}`)
    results.profile(profileMarkdown(s, file.slice(ROOT.length)))
  }
}

async function serviceScenarios(db: BenchDatabase): Promise<void> {
  const missing = ensureServiceBuilt()
  if (missing) {
    for (const s of serviceSteps) results.skip(s, missing)
    return
  }
  info.service = serviceEntry
  if (!serviceEntry.endsWith('dist/gateway/main.js')) results.note(`service entry: ${serviceEntry}`)
  let loadedPop: Loaded
  {
    progress(`population: writing ${pop.sessions.toLocaleString('en')} sessions through bulkInsertSessions (sql/sessions.ts)`)
    const d = await db.open({ maximumPoolSize: 4 })
    try {
      loadedPop = await loadPopulation(d.pool, pop, Buffer.from(keys.phoneKey, 'base64'), progress)
      // The database as a service with a million live sessions finds it in production: vacuumed and
      // analysed (autovacuum's work; it may be off on a test server, as on ours) and checkpointed,
      // with the checkpoint's writes out of the page cache. Otherwise the measured steps pay for
      // the population: plans without statistics, a spread checkpoint and the kernel's writeback
      // of its gigabyte running through the first steps.
      const t0 = performance.now()
      await d.pool.query(sql.unsafe`VACUUM (ANALYZE)`)
      await d.pool.query(sql.unsafe`CHECKPOINT`).catch(err => results.note(`population: CHECKPOINT refused (${(err as Error).message.split('\n')[0]}); the first steps may pay for its writes`))
      if (db.kind === 'postgres') execFileSync('sync')
      progress(`population vacuumed, analysed, checkpointed and synced in ${Math.round(performance.now() - t0)} ms`)
    } finally {
      await d.close()
    }
    results.figure('population.sessions', pop.sessions, 'count')
    results.figure('population.bulk_insert.rate', pop.sessions / (loadedPop.ms.sessions / 1000), 'sessions/s')
    progress(`population written: migrations ${loadedPop.ms.migrate} ms, ${pop.tenants} tenants + ${pop.exchangeKeys} API keys ${loadedPop.ms.tenants} ms, sessions ${loadedPop.ms.sessions} ms`)
  }

  async function boot(cfg: ServiceConfig, steps: readonly StepId[], fn: (svc: Service) => Promise<void>): Promise<void> {
    let svc: Service
    try {
      svc = await startService(ctx, db, cfg)
    } catch (err) {
      failures++
      for (const s of steps) results.skip(s, `service (${cfg.name}) did not boot: ${(err as Error).message.split('\n').slice(0, 8).join(' | ')}`)
      return
    }
    results.figure(`boot.${cfg.name}.ms`, svc.bootMs, 'ms')
    ctx.serverPid = svc.pid
    if (svc.liveSessions !== undefined && svc.liveSessions < pop.sessions) {
      results.note(`service (${cfg.name}) rebuilt ${svc.liveSessions} live sessions, expected at least ${pop.sessions}`)
    }
    if (svc.profileDir) ctx.profileWindows = []
    try {
      await fn(svc)
    } finally {
      ctx.serverPid = undefined
      await svc.stop()
      if (svc.profileDir) profiles(svc.profileDir, ctx.profileWindows ?? [])
      ctx.profileWindows = undefined
    }
  }

  // Boot 1: sandbox provider, no signature. Writes (creates, swaps) come last.
  const first = (['voice', 'read', 'fanout', 'create', 'memory'] as const).filter(has)
  if (first.length) {
    await boot({ name: 'none', signature: 'none' }, first, async svc => {
      if (has('memory')) bootFigures(ctx, svc)
      if (has('voice')) await step('voice (none)', () => voiceScenario(ctx, svc, 'none'))
      let tokens: string[] = []
      if (has('read') || has('fanout') || has('create')) {
        await step('tokens', async () => { tokens = await fetchTokens(svc, loadedPop.primary) })
      }
      if (tokens.length) {
        if (has('read')) await step('read', () => readScenario(ctx, svc, tokens, loadedPop.exchange))
        if (has('fanout')) await step('fanout', () => fanoutScenario(ctx, svc, tokens))
        if (has('create')) await step('create', () => createScenario(ctx, svc, tokens, db.kind))
      }
    })
  }
  if (has('voice')) await boot({ name: 'hmac-sha1', signature: 'hmac-sha1' }, ['voice'], svc => step('voice (hmac-sha1)', () => voiceScenario(ctx, svc, 'hmac-sha1')))

  // Boot 3: the Telnyx provider against the fake on loopback, Ed25519 signatures.
  if (has('ed25519') || has('sms')) {
    let probe: SmsProbe | null = null
    await step('fake Telnyx', async () => { probe = await startSmsProbe(ctx) })
    if (probe) {
      const p: SmsProbe = probe
      await boot({ name: 'telnyx', signature: 'telnyx-ed25519', telnyxBaseUrl: p.baseUrl }, ['ed25519', 'sms'], async svc => {
        // SMS first: its forwards queue behind the record writer, which the voice run would fill.
        if (has('sms')) await step('sms', () => smsScenario(ctx, svc, p))
        if (has('ed25519')) await step('ed25519', () => voiceScenario(ctx, svc, 'telnyx-ed25519'))
      })
      p.child.proc.stdin?.end('quit\n')
      await p.child.stop()
    }
  }

  // Two nodes on this database and REDIS_URL (bench/scenarios/cluster.ts), after every single-node boot.
  if (serviceSteps.includes('two-node')) await step('two-node', () => twoNodeScenario(ctx, db, loadedPop.primary))

  // The same configuration on an empty database: what N sessions add to the resident size.
  if (has('memory') && !opts.smoke) {
    await step('memory (empty service)', async () => {
      const empty = await createBenchDatabase(databaseUrl)
      try {
        const e = await startService({ ...ctx, logPrefix: `${ctx.logPrefix}.empty` }, empty, { name: 'none-empty', signature: 'none' })
        await e.stop()
        const boot1 = results.get('service.boot.ms')
        const rss1 = results.get('service.boot_rss')
        if (boot1 !== undefined && rss1 !== undefined) {
          results.figure('service.empty_boot.ms', e.bootMs, 'ms')
          results.figure('service.rss_per_session', (rss1 - e.rssBytes) / pop.sessions, 'bytes')
        }
      } finally {
        await empty.dispose()
      }
    })
  }
}

info.durationS = (Date.now() - started) / 1000
info.loadAverage += `, ${loadavg()[0]!.toFixed(1)} at the end`
const jsonlName = `${stamp}.jsonl`
// A smoke run proves the suite runs; a partial one (--only, or fewer sessions than the default)
// checks a few figures quickly. Neither may replace the full run's report: only a full run writes
// latest.md and the "## Bench suite" section of bench/RESULTS.md.
const full = !opts.smoke && [...SCENARIO_IDS, ...BASELINE_IDS].every(has) && opts.sessions >= 1_000_000
const report = opts.smoke ? 'smoke' : full ? 'latest' : 'partial'
// Every report names the last full run's verdict where this run's differs (bench/lib/target-history.ts).
const history = join(resultsDir, 'targets.json')
const previous = readTargetRun(history)
writeLatest(join(resultsDir, `${report}.md`), info, results, jsonlName, previous)
writeFileSync(join(resultsDir, `${report}.svg`), latencyChart(results.latencies))
if (full) {
  updateResultsSection(join(ROOT, 'bench', 'RESULTS.md'), info, results, previous)
  writeTargetRun(history, { date: info.date, revision: info.revision, targets: results.targets })
}
rmSync(work, { recursive: true, force: true })
progress(`wrote bench/results/${jsonlName}, bench/results/${report}.md${full ? ', bench/RESULTS.md (## Bench suite)' : ' (only a full run writes latest.md and bench/RESULTS.md)'} in ${Math.round(info.durationS)} s`)
const met = results.targets.filter(t => t.met === true).length
const notMet = results.targets.filter(t => t.met === false).length
progress(`targets: ${met} met, ${notMet} not met, ${results.targets.length - met - notMet} not measured; ${results.skips.length} skipped step(s), ${failures} failure(s)`)
process.exit(failures ? 1 : 0)
