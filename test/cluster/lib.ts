// Shared by the multi-node tests (docs/scaling.md): a private redis-server (tests that kill Redis never
// touch the shared one of TEST_REDIS_URL), two or more real service processes on one database and
// that Redis, one ENTERPRISE tenant, and the exhaustive routing check: every session Postgres
// holds, probed through the voice callback on every node, answers what Postgres says (live: the
// agent reaches the current customer and back; ended, expired or swapped away: not in service).
// A node answering for a session Postgres no longer holds live, or missing one it holds, fails it:
// that is the node's live-session set and proxy index compared with Postgres', session by session.
import { Redis } from 'ioredis'
import { sql, type DatabasePool } from 'slonik'
import { CallbackDriver } from '../support/callback-driver.js'
import { busStream, request, signupChild, startChild, type ChildAccount, type ChildData, type ChildService } from '../support/child-service.js'
import type { privateRedis as PrivateRedis } from '../support/redis-server.js'
export { privateRedis } from '../support/redis-server.js'
import { LIVE, mapLimit, routeLabel, voiceRoute, type Route } from '../durability/lib.js'

export const sleep = (ms: number) => new Promise(r => setTimeout(r, Math.max(0, ms)))

export const NUMBER_POOL = 'US:+12025550100-+12025550699'

export async function startNode(t: Parameters<typeof startChild>[0], data: ChildData, redisUrl: string, env: Record<string, string> = {}): Promise<ChildService> {
  return startChild(t, data, { env: { REDIS_URL: redisUrl, NUMBER_POOL, CPAAS_SIGNATURE: 'none', ...env } })
}

/** One tenant on ENTERPRISE (2,000 requests a minute, 10,000 sessions), in force on every node. */
export async function enterpriseTenant(data: ChildData, nodes: ChildService[], redis: Redis): Promise<ChildAccount> {
  const acc = await signupChild(nodes[0]!.url)
  const db = await data.open({ maximumPoolSize: 1 })
  try {
    await db.pool.query(sql.unsafe`UPDATE tenants SET tier = 'ENTERPRISE' WHERE id = ${acc.tenantId}`)
  } finally {
    await db.close()
  }
  // As a node announces a tenant change: every node refreshes it from Postgres.
  const stream = await busStream(data)
  for (const deadline = Date.now() + 20_000; ;) {
    await redis.xadd(stream, '*', 'n', 'test-operator', 'm', JSON.stringify({ kind: 'tenant', id: acc.tenantId }))
    const limits = await Promise.all(nodes.map(async n => {
      const r = await fetch(`${n.url}/v1/config`, { headers: { authorization: `Bearer ${acc.token}` } })
      await r.arrayBuffer()
      return r.headers.get('x-ratelimit-limit')
    }))
    if (limits.every(l => l === '2000')) return acc
    if (Date.now() > deadline) throw new Error(`ENTERPRISE not in force on every node: ${limits.join(', ')}`)
    await sleep(300)
  }
}

/** What the test did to a session (the numbers are the test's own; Postgres only has them encrypted). */
export interface Sess { id: string; proxy: string; agent: string; customer: string; previous: string[]; busy: boolean; ended: boolean }

export async function create(url: string, token: string, agent: string, customer: string, gracePeriodMinutes = 0): Promise<Sess | string> {
  const r = await request(url, 'POST', '/v1/sessions', { token, body: { agentPhone: agent, customerPhone: customer, gracePeriodMinutes } })
  if (r.status !== 201) return `create ${r.status} ${r.text.slice(0, 200)}`
  return { id: r.body.id, proxy: r.body.proxyNumber, agent, customer, previous: [], busy: false, ended: false }
}

/** A target swap of `s` to `customer`; on 200 the test's record follows it, otherwise the failure is noted. */
export async function swapTo(url: string, token: string, s: Sess, customer: string, failures: string[]): Promise<void> {
  const r = await request(url, 'PATCH', `/v1/sessions/${s.id}/target`, { token, body: { customerPhone: customer } })
  if (r.status === 200) { s.previous.push(s.customer); s.customer = customer } else failures.push(`swap ${r.status} ${r.text.slice(0, 200)}`)
}

/** POST /end of `s`; on 200 it is marked ended, otherwise the failure is noted. */
export async function endSession(url: string, token: string, s: Sess, failures: string[]): Promise<void> {
  const r = await request(url, 'POST', `/v1/sessions/${s.id}/end`, { token })
  if (r.status === 200) s.ended = true; else failures.push(`end ${r.status} ${r.text.slice(0, 200)}`)
}

/**
 * The outage the multi-node tests put their load through: `run(stopped)` starts the load (it loops
 * until `stopped()`), 2 s in Redis is SIGKILLed, 10 s later started again (empty), the load goes on
 * 2 s more and is then stopped and awaited. `ops` counts the load's requests.
 */
export async function redisOutageUnderLoad(redis: Awaited<ReturnType<typeof PrivateRedis>>, run: (stopped: () => boolean) => Promise<unknown>, ops: () => number): Promise<{ opsDuring: number; outageMs: number; backAt: number }> {
  let stop = false
  const load = run(() => stop)
  await sleep(2_000)
  const opsBefore = ops()
  await redis.kill()
  const killedAt = Date.now()
  await sleep(10_000)
  const opsDuring = ops() - opsBefore
  await redis.start()
  const backAt = Date.now()
  await sleep(2_000)
  stop = true
  await load
  return { opsDuring, outageMs: backAt - killedAt, backAt }
}

/** Every session's row as Postgres holds it now. */
export async function dbSessions(pool: DatabasePool): Promise<{ now: number; rows: Map<string, { state: string; expiresAt: number; version: number }> }> {
  return pool.transaction(async tx => {
    const now = await tx.oneFirst(sql.unsafe`SELECT now()`) as number
    const rows = new Map<string, { state: string; expiresAt: number; version: number }>()
    for (const r of await tx.any(sql.unsafe`SELECT id, state, expires_at, version FROM sessions`) as readonly Record<string, any>[]) {
      rows.set(r['id'], { state: r['state'], expiresAt: r['expires_at'], version: r['version'] })
    }
    return { now, rows }
  })
}

/**
 * Probes every session of `sessions` on `node` through the voice callback; returns what differs
 * from Postgres. A session within `marginMs` of its expiresAt is left out (either answer is right).
 */
export async function routingMismatches(node: ChildService, pool: DatabasePool, sessions: readonly Sess[], marginMs = 1_500): Promise<string[]> {
  const driver = new CallbackDriver({ baseUrl: node.url, mode: 'none' })
  const { now, rows } = await dbSessions(pool)
  const out: string[] = []
  await mapLimit(sessions, 4, async s => {
    const row = rows.get(s.id)
    if (!row) { out.push(`${s.id}: not in Postgres`); return }
    if (Math.abs(row.expiresAt - now) < marginMs) return
    const live = LIVE.has(row.state) && row.expiresAt > now
    const want = (from: string): Route => (!live ? { kind: 'dead' } : from === s.agent ? { kind: 'connect', to: s.customer } : from === s.customer ? { kind: 'connect', to: s.agent } : { kind: 'dead' })
    for (const from of [s.agent, s.customer, ...s.previous]) {
      const got = await voiceRoute(driver, from, s.proxy)
      if (routeLabel(got) !== routeLabel(want(from))) {
        out.push(`${s.id} (${row.state} v${row.version}) from ${from === s.agent ? 'agent' : from === s.customer ? 'customer' : 'old customer'}: ${routeLabel(got)}, want ${routeLabel(want(from))}`)
      }
    }
  })
  return out
}

/** Polls routingMismatches on every node until none is left; the time it took (or the last mismatches). */
export async function converge(nodes: ChildService[], pool: DatabasePool, sessions: readonly Sess[], timeoutMs: number): Promise<{ ms: number; left: string[] }> {
  const t0 = Date.now()
  for (;;) {
    const left = (await Promise.all(nodes.map(async (n, i) => (await routingMismatches(n, pool, sessions)).map(m => `node ${i + 1}: ${m}`)))).flat()
    if (left.length === 0 || Date.now() - t0 > timeoutMs) return { ms: Date.now() - t0, left }
    await sleep(200)
  }
}

export function percentile(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)] ?? NaN
}
