// Baselines measured in the same run (style 8): the HTTP ceiling (bare uWS "hello"), the ceiling
// of the callback work alone (bare uWS: form parse + Map.get + TeXML), what a user would otherwise
// pick (the same handler on fastify), one core verifying Ed25519 signatures, the database's
// single-row INSERT rate with 8 connections, and the record ceiling (the callback work
// plus its call row and outbox row in 10 ms group commits through raw pg).
import { fileURLToPath } from 'node:url'
import type { BenchDatabase } from '../lib/database.js'
import { cpuSeconds, freePort, runChild, sleep, startChild, type Child } from '../lib/proc.js'
import { progress } from '../lib/results.js'
import { loaded, unloaded, type Ctx } from './common.js'
import { preflight } from './preflight.js'

const here = (p: string) => fileURLToPath(new URL(p, import.meta.url))

export interface VoiceFiles {
  file: string
  warmFile: string
  distinct: number
  /** The unloaded (1 connection) run's calls, each CallSid once: every one writes its record. */
  unloadedFile: string
  unloadedDistinct: number
}

async function withServer(ctx: Ctx, name: string, script: string, extra: string[], fn: (url: string, child: Child) => Promise<void>, graceMs?: number): Promise<void> {
  const port = await freePort()
  const child = startChild({
    name, cmd: process.execPath, args: ['--import', 'tsx', here(script), String(port), ...extra], core: ctx.pin.serverCore, pin: ctx.pin,
  })
  try {
    const t0 = Date.now()
    await child.waitFor(l => (l.startsWith('listening ') ? l : undefined), 180_000, 'its listening line')
    progress(`${name}: listening on ${port} after ${Date.now() - t0} ms`)
    await fn(`http://127.0.0.1:${port}`, child)
  } finally {
    await child.stop(graceMs)
  }
}

export async function baselineHello(ctx: Ctx, voice: VoiceFiles): Promise<void> {
  await withServer(ctx, 'uWS hello', '../baselines/hello-uws.ts', [], async url => {
    await unloaded(ctx, { name: 'baseline.hello', label: 'uWS hello', url, file: voice.file })
    await loaded(ctx, { name: 'baseline.hello', label: 'uWS hello', url, file: voice.file, warmFile: voice.warmFile })
  })
}

export async function baselineCallbackUws(ctx: Ctx, voice: VoiceFiles): Promise<void> {
  await withServer(ctx, 'uWS callback', '../baselines/callback-uws.ts', [String(ctx.pop.sessions)], async url => {
    await loaded(ctx, { name: 'baseline.callback_uws', label: 'uWS callback (parse + Map.get + XML)', url, file: voice.file, warmFile: voice.warmFile })
  })
}

export async function baselineFastify(ctx: Ctx, voice: VoiceFiles): Promise<void> {
  await withServer(ctx, 'fastify callback', '../baselines/callback-fastify.ts', [String(ctx.pop.sessions)], async url => {
    await loaded(ctx, { name: 'baseline.fastify', label: 'fastify callback', url, file: voice.file, warmFile: voice.warmFile })
  })
}

export async function baselineVerify(ctx: Ctx): Promise<void> {
  progress(`Ed25519 verify loop: one core, ${ctx.opts.duration} s`)
  const lines = await runChild({
    name: 'verify loop', cmd: process.execPath, args: ['--import', 'tsx', here('../lib/verify-loop.ts'), String(ctx.opts.duration)],
    core: ctx.pin.serverCore, pin: ctx.pin,
  }, (ctx.opts.duration + 60) * 1000)
  const j = JSON.parse(lines.find(l => l.startsWith('VERIFYJSON '))!.slice(11)) as { verifies: number; seconds: number }
  ctx.results.figure('baseline.ed25519_verify.rate', j.verifies / j.seconds, 'verifies/s')
}

/**
 * Against real Postgres the loop is a client (load core; the server runs where the OS puts it);
 * embedded, the database lives inside the loop's process, so it takes the server core.
 */
export async function baselineInsert(ctx: Ctx, db: BenchDatabase): Promise<void> {
  progress(`INSERT loop: 8 connections, ${ctx.opts.duration} s, ${db.kind}`)
  const args = db.kind === 'postgres'
    ? { url: db.env.DATABASE_URL, seconds: ctx.opts.duration, connections: 8 }
    : { dataDir: db.env.DATA_DIR, seconds: ctx.opts.duration, connections: 8 }
  const lines = await runChild({
    name: 'insert loop', cmd: process.execPath, args: ['--import', 'tsx', here('../lib/insert-loop.ts'), JSON.stringify(args)],
    core: db.kind === 'postgres' ? ctx.pin.loadCore : ctx.pin.serverCore, pin: ctx.pin,
  }, (ctx.opts.duration + 120) * 1000)
  const j = JSON.parse(lines.find(l => l.startsWith('INSERTJSON '))!.slice(11)) as { inserts: number; seconds: number; p50_us: number; p99_us: number }
  ctx.results.figure('baseline.insert_8conn.rate', j.inserts / j.seconds, 'inserts/s')
  ctx.results.figure('baseline.insert_8conn.p99', j.p99_us, 'us')
}

interface CeilingStats { answered: number; committed: number; errorRows: number; pending: number; commits: number; maxRows: number; errors: number; backendPid: number | null }

async function ceilingStats(url: string): Promise<CeilingStats> {
  return (await (await fetch(`${url}/stats`)).json()) as CeilingStats
}

/**
 * The record ceiling (bench/baselines/record-ceiling.ts) against the run's bench database, in its
 * own scratch tables. Its answers, like the service's, go out before the commit: the run reports
 * the rows still queued when the load stopped and how long they took to drain, so a ceiling that
 * answers faster than Postgres commits is visible as such.
 */
export async function baselineRecordCeiling(ctx: Ctx, db: BenchDatabase, voice: VoiceFiles): Promise<void> {
  const { sessions, proxies, tenants } = ctx.pop
  const target = db.kind === 'postgres' ? { url: db.env.DATABASE_URL } : { dataDir: db.env.DATA_DIR }
  const name = 'baseline.record_ceiling'
  const r = ctx.results
  let final: CeilingStats & { callRows: number; outboxRows: number } | undefined
  await withServer(ctx, 'record ceiling', '../baselines/record-ceiling.ts', [JSON.stringify({ sessions, proxies, tenants, ...target })], async (url, child) => {
    await preflight(ctx, name, url, voice.warmFile, { status: 200, body: /<Dial/ })
    // The voice latency bar (voice unloaded p50 ≤ hello's + 20 µs) against what a recorded call
    // costs one request alone on this machine: the group commit's Postgres work shares the box.
    await unloaded(ctx, { name, label: 'record ceiling', url, file: voice.unloadedFile, distinct: voice.unloadedDistinct })
    const over = r.difference(`${name}.unloaded_p50_over_hello`, `${name}.unloaded_p50`, 'baseline.hello.unloaded_p50', 'us')
    if (over !== undefined && over > 20) r.note(`the record ceiling's own unloaded p50 is ${Math.round(over)} µs over uWS hello's: the voice bar of + 20 µs is below what a recorded call costs alone here`)
    ctx.serverPid = child.pid
    try {
      const before = await ceilingStats(url)
      // Its one Postgres connection's CPU time (a local server; WAL writer and checkpointer aside).
      const backend0 = before.backendPid === null ? Number.NaN : cpuSeconds(before.backendPid)
      await loaded(ctx, { name, label: 'record ceiling (uWS + Map.get + XML + pg group commit)', url, file: voice.file, warmFile: voice.warmFile, distinct: voice.distinct })
      const after = await ceilingStats(url)
      const t0 = Date.now()
      let s = after
      while (s.pending > 0 && Date.now() - t0 < 60_000) {
        await sleep(20)
        s = await ceilingStats(url)
      }
      const drainMs = Date.now() - t0
      const answered = after.answered - before.answered
      const committed = s.committed - before.committed
      const commits = s.commits - before.commits
      const backendUs = (cpuSeconds(s.backendPid ?? -1) - backend0) * 1e6 / committed // warm-up, run and drain
      progress(`record ceiling: ${answered.toLocaleString('en')} calls answered in the warm-up and the run, ${committed.toLocaleString('en')} rows committed ` +
        `in ${commits.toLocaleString('en')} commits (largest ${s.maxRows}); ${after.pending.toLocaleString('en')} queued at the end, drained in ${drainMs} ms` +
        (Number.isFinite(backendUs) ? `; its Postgres backend spent ${backendUs.toFixed(1)} µs of CPU per call row (with its outbox row)` : ''))
      // One commit in flight and one filling are the design; a backlog of many is not.
      if (drainMs > 500) {
        r.note(`${name}: answered faster than Postgres committed: ${after.pending.toLocaleString('en')} of ${answered.toLocaleString('en')} rows were still queued when the load stopped ` +
          `(drained in ${(drainMs / 1000).toFixed(1)} s): its throughput is above what it can record for long`)
      }
    } finally {
      ctx.serverPid = undefined
    }
    // SIGTERM: it commits what is queued, counts its rows, drops its tables.
    const exited = child.exited
    child.proc.kill('SIGTERM')
    await exited
    const line = child.lines.find(l => l.startsWith('CEILINGJSON '))
    if (line) final = JSON.parse(line.slice(12)) as typeof final
  }, 90_000)
  if (!final) throw new Error('record ceiling: no CEILINGJSON line at exit (its tables may not have been dropped; the bench database is dropped at the end)')
  progress(`record ceiling: ${final.callRows.toLocaleString('en')} call rows and ${final.outboxRows.toLocaleString('en')} outbox rows for ${final.answered.toLocaleString('en')} answered calls ` +
    `(replayed CallSids add none), ${final.commits.toLocaleString('en')} commits, ${final.errors} failed`)
  if (final.errors > 0 || final.callRows !== final.outboxRows) {
    r.note(`${name}: ${final.errors} commits failed (${final.errorRows} rows); ${final.callRows} call rows vs ${final.outboxRows} outbox rows`)
  }
  // If the ceiling itself is below 0.25 of hello, the voice bars are held to the ceiling.
  const ceiling = r.get(`${name}.rps`)
  const hello = r.get('baseline.hello.rps')
  if (ceiling !== undefined && hello !== undefined) {
    const share = ceiling / hello
    r.target('0. record ceiling', 'the record ceiling reaches ≥ 25 % of uWS hello (if not, the voice bar is held to the ceiling)', share >= 0.25,
      `${Math.round(ceiling).toLocaleString('en')} vs ${Math.round(hello).toLocaleString('en')} req/s = ${share.toFixed(2)}`)
    if (share < 0.25) r.note(`the record ceiling is below 0.25 of uWS hello (${share.toFixed(2)}): the voice throughput target is held to the ceiling (voice.*.vs_record_ceiling ≥ 0.7)`)
  }
}
