// Baselines measured in the same run (STYLE 8): the HTTP ceiling (bare uWS "hello"), the ceiling
// of the callback work alone (bare uWS: form parse + Map.get + TeXML), what a user would otherwise
// pick (the same handler on fastify), one core verifying Ed25519 signatures, and the database's
// single-row INSERT rate with 8 connections.
import { fileURLToPath } from 'node:url'
import type { BenchDatabase } from '../lib/database.js'
import { freePort, runChild, startChild } from '../lib/proc.js'
import { progress } from '../lib/results.js'
import { loaded, unloaded, type Ctx } from './common.js'

const here = (p: string) => fileURLToPath(new URL(p, import.meta.url))

export interface VoiceFiles { file: string; warmFile: string; distinct: number }

async function withServer(ctx: Ctx, name: string, script: string, extra: string[], fn: (url: string) => Promise<void>): Promise<void> {
  const port = await freePort()
  const child = startChild({
    name, cmd: process.execPath, args: ['--import', 'tsx', here(script), String(port), ...extra], core: ctx.pin.serverCore, pin: ctx.pin,
  })
  try {
    const t0 = Date.now()
    await child.waitFor(l => (l.startsWith('listening ') ? l : undefined), 180_000, 'its listening line')
    progress(`${name}: listening on ${port} after ${Date.now() - t0} ms`)
    await fn(`http://127.0.0.1:${port}`)
  } finally {
    await child.stop()
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
