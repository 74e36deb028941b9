// Scenarios 4 and 5 over the REST API with real tokens: POST /v1/sessions (a Postgres transaction
// each, against the INSERT-loop baseline), GET /v1/sessions/:id and the token exchange (against
// uWS hello), with the bars of docs/benchmarks.md. Tenants and API keys are sized so the rate limits of contract 8
// are not what is measured.
import { join } from 'node:path'
import type { Credential } from '../lib/population.js'
import { writeCreateFile, writeGetSessionFile, writeTokenFile } from '../lib/requests.js'
import { maxTarget, ratioTarget } from '../lib/targets.js'
import { loaded, requestCount, type Ctx } from './common.js'
import { preflight } from './preflight.js'
import type { Service } from './service.js'

/** One tenant token per tenant, through the real exchange (contract 4.1). */
export async function fetchTokens(svc: Service, creds: readonly Credential[]): Promise<string[]> {
  const tokens: string[] = []
  for (let k = 0; k < creds.length; k += 16) {
    const batch = await Promise.all(creds.slice(k, k + 16).map(async c => {
      const res = await fetch(`${svc.url}/v1/auth/token`, {
        method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ apiKey: c.apiKey, apiSecret: c.apiSecret }),
      })
      const body = await res.text()
      if (res.status !== 200) throw new Error(`token exchange for tenant ${c.tenant}: ${res.status} ${body.slice(0, 200)}`)
      return (JSON.parse(body) as { accessToken: string }).accessToken
    }))
    tokens.push(...batch)
  }
  return tokens
}

export async function readScenario(ctx: Ctx, svc: Service, tokens: readonly string[], exchange: readonly Credential[]): Promise<void> {
  const r = ctx.results
  const cap = ctx.opts.smoke ? 20_000 : 200_000
  const get = join(ctx.work, `get-${svc.port}`)
  const distinct = requestCount(ctx.opts.duration, 25_000, cap)
  writeGetSessionFile(`${get}.req`, distinct, ctx.pop, tokens)
  await preflight(ctx, 'rest.get_session', svc.url, `${get}.req`, { status: 200, body: /"id"/ })
  await loaded(ctx, { name: 'rest.get_session', label: 'maskline GET /v1/sessions/:id', url: svc.url, file: `${get}.req`, warmFile: `${get}.req` })
  r.ratio('rest.get_session.vs_hello', 'rest.get_session.rps', 'baseline.hello.rps')
  ratioTarget(ctx, '5. GET /v1/sessions/:id', 'throughput ≥ 50 % of uWS hello (answered from memory)', 'rest.get_session.vs_hello', 0.5)
  r.ratio('rest.get_session.p99_vs_hello', 'rest.get_session.p99', 'baseline.hello.p99')
  maxTarget(ctx, '5. GET /v1/sessions/:id', 'p99 ≤ 1.5 × uWS hello\'s p99 at the same 32 connections', 'rest.get_session.p99_vs_hello', 1.5, '×')

  // Each key may exchange 10 times a minute (contract 8.4): the warm-up gets its own keys.
  const tok = join(ctx.work, `token-${svc.port}`)
  const warmKeys = Math.floor(exchange.length * (ctx.opts.warmup / (ctx.opts.warmup + ctx.opts.duration)))
  writeTokenFile(`${tok}.warm.req`, exchange.slice(0, Math.max(1, warmKeys)))
  writeTokenFile(`${tok}.req`, exchange.slice(warmKeys + 1))
  await preflight(ctx, 'rest.token', svc.url, `${tok}.warm.req`, { status: 200, body: /accessToken/ })
  await loaded(ctx, { name: 'rest.token', label: 'maskline POST /v1/auth/token', url: svc.url, file: `${tok}.req`, warmFile: `${tok}.warm.req` })
  r.ratio('rest.token.vs_hello', 'rest.token.rps', 'baseline.hello.rps')
  ratioTarget(ctx, '5. POST /v1/auth/token', 'throughput ≥ 20 % of uWS hello', 'rest.token.vs_hello', 0.2)
}

export async function createScenario(ctx: Ctx, svc: Service, tokens: readonly string[], dbKind: 'embedded' | 'postgres'): Promise<void> {
  const r = ctx.results
  const cap = ctx.opts.smoke ? 20_000 : 150_000
  const base = join(ctx.work, `create-${svc.port}`)
  const warm = requestCount(ctx.opts.warmup, 6_000, cap / 3, 100)
  const distinct = requestCount(ctx.opts.duration, 6_000, cap)
  writeCreateFile(`${base}.warm.req`, warm, ctx.pop, tokens, 0)
  writeCreateFile(`${base}.req`, distinct, ctx.pop, tokens, warm)
  await preflight(ctx, 'rest.create_session', svc.url, `${base}.warm.req`, { status: 201, body: /"proxyNumber"/ })
  await loaded(ctx, { name: 'rest.create_session', label: `maskline POST /v1/sessions (${dbKind})`, url: svc.url, file: `${base}.req`, warmFile: `${base}.warm.req`, distinct,
    repeats: 'the same two parties again: a new session on another proxy of the tenant' })
  r.ratio('rest.create_session.vs_insert_loop', 'rest.create_session.rps', 'baseline.insert_8conn.rate')
  const s = `4. POST /v1/sessions${dbKind === 'embedded' ? ' (embedded PGlite; the bar is set for real Postgres: set DATABASE_URL)' : ''}`
  // Per-create CPU (cpu_per_req.*) is reported, not judged: the bar is the ratio to the same run's INSERT loop.
  ratioTarget(ctx, s, 'throughput ≥ 60 % of a single-row INSERT loop with 8 connections', 'rest.create_session.vs_insert_loop', 0.6)
  const p99 = r.get('rest.create_session.p99')
  // A closed loop of 32 connections at saturation measures the queue as much as the service
  // (Little's law: p50 ≈ 32 / throughput), so the latency bar is also read where the throughput
  // bar is set: the same requests, paced at 25 % of the INSERT loop.
  r.target(s, 'p99 ≤ 20 ms at saturation (32 connections, closed loop)', p99 === undefined ? null : p99 <= 20_000, p99 === undefined ? 'not measured' : `p99 ${(p99 / 1000).toFixed(2)} ms`)
  const insertRate = r.get('baseline.insert_8conn.rate')
  if (insertRate === undefined) return
  const rate = 0.25 * insertRate
  writeCreateFile(`${base}.paced.req`, requestCount(ctx.opts.duration, rate * 1.2, cap), ctx.pop, tokens, warm + distinct)
  const paced = await loaded(ctx, { name: 'rest.create_session.paced', label: `maskline POST /v1/sessions (${dbKind}), paced at 25 % of the INSERT loop`,
    url: svc.url, file: `${base}.paced.req`, rate })
  const ok = paced.okRps >= rate * 0.95
  r.target(s, 'p99 ≤ 20 ms paced at 25 % of the INSERT loop', ok ? paced.latencyUs.p99 <= 20_000 : false,
    `p99 ${(paced.latencyUs.p99 / 1000).toFixed(2)} ms at ${Math.round(paced.okRps)} of ${Math.round(rate)} req/s offered${ok ? '' : ' (the service did not keep up with the pace)'}`)
}
