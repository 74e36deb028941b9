// Scenario 6: heap bytes per live session at N, and the boot time to rebuild N live sessions from
// Postgres. The service has no heap hook (and gets no bench-only one), so the heap figure comes
// from the engine bench (bench/route.bench.ts, same engine code, gc'd before and after building N
// sessions), run as a child on the server core; the service itself contributes its boot time and
// resident size after boot, next to an empty service booted with the same configuration.
import { fileURLToPath } from 'node:url'
import { runChild } from '../lib/proc.js'
import { progress } from '../lib/results.js'
import type { Ctx } from './common.js'

export async function engineHeap(ctx: Ctx): Promise<void> {
  const args = ['--expose-gc', '--import', 'tsx', fileURLToPath(new URL('../route.bench.ts', import.meta.url)), '--sessions', String(ctx.pop.sessions)]
  if (ctx.opts.smoke) args.push('--smoke')
  progress(`engine bench (bench/route.bench.ts) at ${ctx.pop.sessions.toLocaleString('en')} sessions, for heap per live session`)
  const lines = await runChild({ name: 'engine bench', cmd: process.execPath, args, core: ctx.pin.serverCore, pin: ctx.pin }, 900_000)
  const figures = new Map<string, number>()
  for (const l of lines) {
    const m = /^bench: (\S+) (\S+) (\S+)/.exec(l)
    if (m) figures.set(m[1]!, Number(m[2]))
  }
  const heap = figures.get('heap.per_session')
  const route = figures.get('route.median')
  if (heap !== undefined) ctx.results.figure('engine.heap_per_session', heap, 'bytes')
  if (route !== undefined) ctx.results.figure('engine.route.median', route, 'ns')
  const at = ctx.pop.sessions === 1_000_000 ? '1,000,000' : `${ctx.pop.sessions.toLocaleString('en')} (the bar is set at 1,000,000)`
  ctx.results.target('6. memory', `heap bytes per live session at ${at} ≤ 600 B (engine bench)`,
    heap === undefined ? null : heap <= 600, heap === undefined ? 'engine bench printed no heap.per_session' : `${heap} B`)
}

export function bootFigures(ctx: Ctx, boot: { bootMs: number; serviceBootMs: number | undefined; rssBytes: number; liveSessions: number | undefined }): void {
  const r = ctx.results
  r.figure('service.boot.ms', boot.bootMs, 'ms')
  if (boot.serviceBootMs !== undefined) r.figure('service.boot.rebuild_ms', boot.serviceBootMs, 'ms')
  r.figure('service.boot_rss', boot.rssBytes, 'bytes')
  progress(`boot: ${(boot.bootMs / 1000).toFixed(1)} s from spawn to "listening" for ${(boot.liveSessions ?? ctx.pop.sessions).toLocaleString('en')} live sessions ` +
    `(startService ${boot.serviceBootMs === undefined ? '?' : (boot.serviceBootMs / 1000).toFixed(1)} s), RSS ${Math.round(boot.rssBytes / 2 ** 20)} MiB`)
}
