// `--only login-flood`: bench/login-flood.bench.ts (its own service child on embedded PGlite) run
// from the suite, its `bench:` lines recorded as figures and its `# target:` lines as targets.
// Optional (not in a full run: a flood of password hashes is minutes of a loaded core), and left
// out of --smoke (the gate before every test run), where it is skipped with that reason.
import { spawn } from 'node:child_process'
import { createInterface } from 'node:readline'
import { progress } from '../lib/results.js'
import type { Ctx } from './common.js'

export async function loginFloodScenario(ctx: Ctx): Promise<void> {
  if (ctx.opts.smoke) {
    ctx.results.skip('login-flood', 'not in a smoke run (minutes of password hashing): npm run bench -- --only login-flood')
    return
  }
  const child = spawn(process.execPath, ['--import', 'tsx', 'bench/login-flood.bench.ts'], { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, BENCH_SECONDS: String(Math.max(ctx.opts.duration, 8)) } })
  const closed = new Promise<number | null>(resolve => child.once('close', resolve))
  for await (const line of createInterface({ input: child.stdout })) {
    const figure = /^bench: (\S+) (\S+) (\S+)$/.exec(line)
    const target = /^# target(?: \(issue \d+\))?: (.*): (met|NOT met) \((.*)\)$/.exec(line)
    if (figure) ctx.results.figure(figure[1]!, Number(figure[2]), figure[3]!)
    else if (target) ctx.results.target('login-flood', target[1]!, target[2] === 'met', target[3]!)
    else progress(line.replace(/^# /, ''))
  }
  const code = await closed
  // Exit 1 is a target not met (recorded above); anything else is the bench failing.
  if (code !== 0 && code !== 1) throw new Error(`bench/login-flood.bench.ts exited ${code}`)
}
