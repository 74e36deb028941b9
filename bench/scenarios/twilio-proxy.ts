// Scenario 8, the Twilio Proxy façade against the native API on one service (bench/twilio-proxy.bench.ts,
// its own service on embedded PGlite: the ratios compare the two APIs on the same store, and the
// population's database stays untouched). A smoke run sends fewer requests.
import { childBench } from './child-bench.js'
import type { Ctx } from './common.js'

export async function twilioProxyScenario(ctx: Ctx): Promise<void> {
  const env = { ...process.env }
  delete env.DATABASE_URL
  delete env.REDIS_URL
  const args = ctx.opts.smoke ? ['--tenants', '1', '--creates', '50', '--calls', '200'] : []
  await childBench(ctx, { section: '8. Twilio Proxy façade', script: 'bench/twilio-proxy.bench.ts', args, env })
}
