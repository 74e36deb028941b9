// Question: how long does the service take to boot on N live sessions: rebuild every session's
// actor, the proxy index and the pool from Postgres, arm the timers, and expire at once what fell
// due while it was down?
//
//   node --import tsx bench/boot.bench.ts [--sessions N] [--expired M] [--calls K] [--smoke]
//
// N live sessions (default 100,000; --smoke 5,000) are written through bulkInsertSessions
// (sql/sessions.ts, via bench/lib/population.ts: 10 sessions per proxy number, tenants of 4,000
// sessions on ENTERPRISE) into a fresh database: next to DATABASE_URL when it is set, else an
// embedded PGlite in a temporary DATA_DIR. M more sessions (default 0) are written already past
// their deadline, so the boot has them to expire. --calls K gives every live session K call
// records (then VACUUM ANALYZE, as autovacuum would have run by then): contract 2.2 callCount and
// lastCallAt are counted from them at boot (migration 011). Then the service is started as `npm start`
// does (the compiled dist/gateway/main.js with `npm start`'s Node flags, built first when stale, as
// `npm run bench` starts it; configured through its environment only) and timed to its "listening" log line, which carries startService's own figure (bootMs: database, rebuild,
// boot expiry, listen), and to its 'boot' line (the phases before listening: database, tenants and
// numbers, sessions; the heap after the load). One voice callback per sampled session checks that the rebuilt engine
// routes. Prints one `bench: <name> <value> <unit>` line per figure.
import { randomBytes } from 'node:crypto'
import { sql } from 'slonik'
import { EnvSchema } from '../gateway/config.js'
import { createPartyHasher, createPhoneCipher } from '../sql/crypto.js'
import { bulkInsertSessions, type BulkSessionRow } from '../sql/sessions.js'
import type { E164, SessionRecord } from '../engine/types.js'
import { createBenchDatabase } from './lib/database.js'
import { detectPinning } from './lib/machine.js'
import {
  agentOf, customerOf, loadPopulation, numberPoolFor, proxiesFor, proxyOf, sessionIdOf, tenantIdOf, tenantOfSession, type Population,
} from './lib/population.js'
import { rssOf, sleep, startChild } from './lib/proc.js'
import { ensureServiceBuilt, serviceArgs } from './scenarios/service.js'

const args = process.argv.slice(2)
function option(name: string): number | undefined {
  const i = args.indexOf(name)
  if (i === -1) return undefined
  const v = Number((args[i + 1] ?? '').replaceAll('_', ''))
  if (!Number.isInteger(v) || v < 0) throw new Error(`${name} needs a whole number`)
  return v
}
for (const a of args) {
  if (a.startsWith('--') && !['--smoke', '--sessions', '--expired', '--calls'].includes(a)) throw new Error(`unknown option ${a} (known: --sessions N, --expired M, --calls K, --smoke)`)
}
const smoke = args.includes('--smoke')
const N = option('--sessions') ?? (smoke ? 5_000 : 100_000)
const EXPIRED = option('--expired') ?? 0
const CALLS = option('--calls') ?? 0
const SESSIONS_PER_TENANT = 4_000
const CONFIG_VARS = new Set(Object.keys(EnvSchema.properties))

const figure = (name: string, value: number, unit: string) => console.log(`bench: ${name} ${value} ${unit}`)
const note = (line: string) => console.error(`boot bench: ${line}`)

// Sessions N..N+EXPIRED-1 follow the population's layout (same tenant per proxy, unique parties),
// created two days ago and due a day ago: still live in the database, due at the next boot.
async function writeExpired(pool: Parameters<typeof bulkInsertSessions>[0], pop: Population, phoneKey: Buffer): Promise<void> {
  if (EXPIRED === 0) return
  const salts = new Map((await pool.any(sql.unsafe`SELECT id, salt FROM tenants`) as readonly { id: string; salt: Buffer }[]).map(r => [r.id, Buffer.from(r.salt)]))
  const cipher = createPhoneCipher(phoneKey)
  const hash = createPartyHasher(phoneKey)
  const createdAt = Date.now() - 2 * 86_400_000
  const rows: BulkSessionRow[] = []
  for (let i = N; i < N + EXPIRED; i++) {
    const tenantId = tenantIdOf(tenantOfSession(i, pop))
    const agentPhone = agentOf(i) as E164
    const customerPhone = customerOf(i) as E164
    const rec: SessionRecord = {
      id: sessionIdOf(i), tenantId, proxyNumber: proxyOf(i, pop.proxies) as E164, state: 'ACTIVE', directionMode: 'BIDIRECTIONAL',
      gracePeriodMinutes: 15, maxDurationMinutes: 1_440, recordingEnabled: false, consentPrompt: 'DEFAULT', agentPhone, customerPhone,
      createdAt, activatedAt: createdAt, expiresAt: createdAt + 1_440 * 60_000, endedAt: null, expiredAt: null, version: 1,
    }
    const salt = salts.get(tenantId)!
    rows.push({ rec, agentHash: hash(salt, agentPhone), customerHash: hash(salt, customerPhone), agentEnc: cipher.encrypt(agentPhone), customerEnc: cipher.encrypt(customerPhone) })
  }
  await bulkInsertSessions(pool, rows)
}

interface Listening { time: number; port: number; bootMs: number; liveSessions: number }

/** startService's 'boot' line: the phases before listening (database, tenants and numbers, sessions). */
function bootPhases(lines: readonly string[]): { ms: Record<string, number>; heapMiB: number } | undefined {
  for (const line of lines) {
    if (!line.startsWith('{') || !line.includes('"boot"')) continue
    try {
      const o = JSON.parse(line) as { msg?: unknown; ms?: Record<string, number>; heapMiB?: number }
      if (o.msg === 'boot' && o.ms) return { ms: o.ms, heapMiB: Number(o.heapMiB) }
    } catch { /* not ours */ }
  }
  return undefined
}

function listening(line: string): Listening | undefined {
  if (!line.startsWith('{') || !line.includes('"listening"')) return undefined
  try {
    const o = JSON.parse(line) as Record<string, unknown>
    if (o['msg'] !== 'listening' || typeof o['port'] !== 'number') return undefined
    return { time: Number(o['time']), port: o['port'], bootMs: Number(o['bootMs']), liveSessions: Number(o['liveSessions']) }
  } catch {
    return undefined
  }
}

async function main() {
  const pop: Population = {
    sessions: N, proxies: Math.max(proxiesFor(N + EXPIRED), 1), tenants: Math.max(1, Math.ceil((N + EXPIRED) / SESSIONS_PER_TENANT)), exchangeKeys: 0,
  }
  const db = await createBenchDatabase(process.env.DATABASE_URL || undefined)
  note(`${db.label}; ${N.toLocaleString('en')} live sessions${EXPIRED ? ` + ${EXPIRED.toLocaleString('en')} due` : ''}${CALLS ? `, ${CALLS} call records each` : ''} on ${pop.proxies.toLocaleString('en')} numbers, ${pop.tenants} tenants`)
  const phoneKey = randomBytes(32)
  let child: ReturnType<typeof startChild> | null = null
  try {
    // 1. The population, through the store's bulk path.
    const t0 = Date.now()
    const conn = await db.open({ maximumPoolSize: 2 })
    try {
      const loaded = await loadPopulation(conn.pool, pop, phoneKey, note)
      await writeExpired(conn.pool, pop, phoneKey)
      if (CALLS > 0) {
        const t1 = Date.now()
        await conn.pool.query(sql.unsafe`
          INSERT INTO call_records (id, session_id, tenant_id, provider_call_id, status, direction, duration_seconds, initiated_at, party_b_hash)
          SELECT gen_random_uuid(), s.id, s.tenant_id, 'boot-' || s.id || '-' || k, 'COMPLETED', 'A_TO_B', 60,
                 s.created_at + make_interval(mins => k), 'h'
          FROM sessions s CROSS JOIN generate_series(1, ${CALLS}) k`)
        await conn.pool.query(sql.unsafe`VACUUM ANALYZE call_records`)
        note(`${((N + EXPIRED) * CALLS).toLocaleString('en')} call records written in ${Date.now() - t1} ms`)
      }
      const live = await conn.pool.oneFirst(sql.unsafe`SELECT count(*) FROM sessions WHERE state IN ('PENDING','ACTIVE','GRACE_PERIOD')`)
      if (live !== N + EXPIRED) throw new Error(`population: ${live} live sessions written, expected ${N + EXPIRED}`)
      await conn.pool.query(sql.unsafe`CHECKPOINT`)
      figure('boot.population_ms', Date.now() - t0, 'ms')
      figure('boot.population_rate', Math.round(N / (loaded.ms.sessions / 1000)), 'sessions/s')
    } finally {
      await conn.close() // embedded: one process per DATA_DIR, the service's from now on
    }

    // 2. The service, as `npm start` runs it. Not through tsx: its loader and the sources it
    //    transpiles added ~100 MiB to the RSS after a 1M boot (bench/RESULTS.md, "Boot").
    const unbuilt = ensureServiceBuilt()
    if (unbuilt) throw new Error(`the service cannot run: ${unbuilt}`)
    const env: NodeJS.ProcessEnv = {}
    for (const [k, v] of Object.entries(process.env)) if (!CONFIG_VARS.has(k) && !k.startsWith('TELNYX_')) env[k] = v
    Object.assign(env, db.env, {
      PORT: '0', HOST: '127.0.0.1', JWT_SECRET: randomBytes(48).toString('base64url'), PHONE_KEY: phoneKey.toString('base64'),
      NUMBER_POOL: numberPoolFor(pop), CPAAS_PROVIDER: 'sandbox', CPAAS_SIGNATURE: 'none', LOG_LEVEL: 'info',
    })
    const pin = detectPinning()
    const spawned = Date.now()
    child = startChild({ name: 'service', cmd: process.execPath, args: [...serviceArgs()], core: null, pin, env })
    const ready = await child.waitFor(listening, Math.max(300_000, N), 'its "listening" log line')
    const spawnToListening = ready.time - spawned
    await sleep(500)
    const rss = rssOf(child.pid)
    if (ready.liveSessions !== N + EXPIRED) throw new Error(`the service rebuilt ${ready.liveSessions} live sessions, expected ${N + EXPIRED}`)

    // 3. Did it rebuild what routes? A sample of sessions, and every due one is expired.
    const base = `http://127.0.0.1:${ready.port}`
    const sample = Array.from({ length: 20 }, (_, k) => Math.floor((k * (N - 1)) / 19))
    for (const i of sample) {
      const body = new URLSearchParams({ AccountSid: 'bench', CallSid: `boot-${i}`, From: agentOf(i), To: proxyOf(i, pop.proxies), CallStatus: 'ringing', Direction: 'inbound' })
      const xml = await (await fetch(`${base}/v1/webhooks/cpaas/voice`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body })).text()
      if (!xml.includes(`>${customerOf(i)}</Number>`)) throw new Error(`session ${i}: the rebuilt engine does not connect the agent to the customer: ${xml.slice(0, 200)}`)
    }
    const lines = [...child.lines]
    await child.stop(15_000)
    child = null
    if (EXPIRED > 0) {
      const check = await db.open({ maximumPoolSize: 1 })
      try {
        const left = await check.pool.oneFirst(sql.unsafe`
          SELECT count(*) FROM sessions WHERE state IN ('PENDING','ACTIVE','GRACE_PERIOD') AND expires_at <= now()`)
        const events = await check.pool.oneFirst(sql.unsafe`SELECT count(*) FROM outbox WHERE type = 'session.expired'`)
        if (left !== 0 || events !== EXPIRED) throw new Error(`boot expiry: ${left} due sessions still live, ${events} session.expired events (expected 0 and ${EXPIRED})`)
      } finally {
        await check.close()
      }
    }

    figure('boot.sessions', N, 'sessions')
    if (EXPIRED > 0) figure('boot.expired_at_boot', EXPIRED, 'sessions')
    figure('boot.ms', ready.bootMs, 'ms')
    figure('boot.sessions_per_s', Math.round((N + EXPIRED) / (ready.bootMs / 1000)), 'sessions/s')
    figure('boot.spawn_to_listening_ms', spawnToListening, 'ms')
    figure('boot.rss', Math.round(rss / 2 ** 20), 'MiB')
    const phases = bootPhases(lines)
    if (phases) {
      for (const [name, ms] of Object.entries(phases.ms)) figure(`boot.phase.${name}_ms`, ms, 'ms')
      figure('boot.heap_after_load', phases.heapMiB, 'MiB')
    }
    note(`${db.kind}: startService ${ready.bootMs} ms for ${(N + EXPIRED).toLocaleString('en')} sessions, ${spawnToListening} ms from spawn to "listening", RSS ${Math.round(rss / 2 ** 20)} MiB; ${sample.length} sampled sessions route`)
  } finally {
    if (child) await child.stop(5_000)
    await db.dispose()
  }
}

main().catch(err => {
  console.error(err instanceof Error ? err.stack ?? err.message : err)
  process.exit(1)
})
