// `--only login-flood`: bench/login-flood.bench.ts (its own service child on embedded PGlite) run
// from the suite (bench/scenarios/child-bench.ts). Optional (not in a full run: a flood of password
// hashes is minutes of a loaded core), and left out of --smoke (the gate before every test run),
// where it is skipped with that reason.
import { childBench } from './child-bench.js'
import type { Ctx } from './common.js'

export async function loginFloodScenario(ctx: Ctx): Promise<void> {
  if (ctx.opts.smoke) {
    ctx.results.skip('login-flood', 'not in a smoke run (minutes of password hashing): npm run bench -- --only login-flood')
    return
  }
  await childBench(ctx, { section: 'login-flood', script: 'bench/login-flood.bench.ts', env: { ...process.env, BENCH_SECONDS: String(Math.max(ctx.opts.duration, 8)) } })
}
