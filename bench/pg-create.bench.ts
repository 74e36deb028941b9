// Postgres work per session create: the real statement of sql/sessions.ts
// (createSession, the named statement on the plain `pg` path, as POST /v1/sessions runs it without
// an Idempotency-Key), timed on a scratch database next to DATABASE_URL, one create at a time, so
// the CPU Postgres spends per create is measured without the HTTP service, the load generator or
// the scheduler between them (the figure `npm run bench -- --only create` reports is the same
// work at 32 connections, and moves by ±10 % from run to run on a 2-core machine).
//
//   DATABASE_URL=postgres://postgres@127.0.0.1:5432/test node --import tsx bench/pg-create.bench.ts \
//     [--rows 5000] [--sessions 200000] [--rounds 3] [--refused] [--batch N] [--keyed] [--keep] [--steps 'ALTER …; DROP INDEX …|…']
//
// --sessions live sessions (and their participant rows) are written first with SQL, on 10 sessions
// per proxy number, so index descents meet tables of a realistic depth; then VACUUM ANALYZE and a
// CHECKPOINT. Each round times --rows creates of new parties on the population's proxies, each by
// the proxy's tenant (no clash, within quota: every create is 'ok'). --refused makes every create
// clash with a participant already on its proxy instead: the statement runs its gates and writes
// nothing, so its figure is the fixed cost of a create statement (protocol, plan revalidation,
// executor start-up, the read-only gates, a commit with no WAL to flush). --batch N writes the
// creates N at a time through createSessionsBatch (migration 015's create_sessions_batch), as the
// service does when creates arrive while another is at the database; the figures stay per create.
// --keyed gives every create an Idempotency-Key (alone: the key's claim and the create in a
// transaction; in a batch: claimed by create_sessions_batch).
//
// Prints, per round:
//   bench: pg.create.us <n> us           wall time of a create as the caller sees it, median
//   bench: pg.create.cpu_us <n> us       CPU of Postgres per create
// The CPU figure is that of every local Postgres process (bench/lib/proc.ts cpuSnapshot, as the
// suite's cpu_per_req.postgres: WAL writer and reaped backends included); it needs Postgres on this
// machine and is left out otherwise. Nothing else should run meanwhile.
import { randomBytes } from 'node:crypto'
import { sql, type DatabasePool } from 'slonik'
import { newEnvelope } from '../sql/vocabulary/event-envelope.js'
import { uuidv7 } from '../sql/vocabulary/ids.js'
import type { E164, SessionId, SessionRecord } from '../engine/types.js'
import { migrate } from '../sql/migrate.js'
import { directPool } from '../sql/direct.js'
import { createSession, createSessionsBatch, type CreateSessionArgs } from '../sql/sessions.js'
import { cpuSnapshot } from './lib/proc.js'
import { tenantIdOf } from './lib/population.js'
import { applyStep, requireDatabaseUrl, scriptArgs, seedTenants, tenantIdSql, withScratchDatabase } from './lib/script.js'

const { opt, num, flag } = scriptArgs()
const ROWS = num('--rows', 5_000)
const SESSIONS = num('--sessions', 200_000)
const ROUNDS = num('--rounds', 3)
const TENANTS = 50
const PROXIES = Math.max(TENANTS, Math.ceil(SESSIONS / 10))
const KEEP = flag('--keep')
const REFUSED = flag('--refused')
/** --batch N: creates go N at a time through createSessionsBatch (one statement per N). */
const BATCH = num('--batch', 1)
const KEYED = flag('--keyed')
if (REFUSED && BATCH > 1) throw new Error('--refused times creates alone: a refused batch writes nothing and hands each create back')
/** The agent's party hash of every create with --refused: on every proxy already. */
const TAKEN = 'bench-taken'
/** --steps 'SQL;SQL|SQL': after the rounds, each step (|-separated) is applied and timed again. */
const STEPS = flag('--steps') ? opt('--steps', '').split('|').filter(x => x.trim()) : []

const url = requireDatabaseUrl()

const proxyOf = (p: number) => `+1555${String(p).padStart(7, '0')}` as E164

async function seed(pool: DatabasePool): Promise<void> {
  await seedTenants(pool, TENANTS)
  await pool.query(sql.unsafe`
    INSERT INTO proxy_numbers (number, region, tenant_id, last_tenant_id, live_sessions)
    SELECT '+1555' || lpad(p::text, 7, '0'), 'US', t, t, 10
    FROM generate_series(0, ${PROXIES - 1}) p, LATERAL (SELECT ${tenantIdSql(sql.fragment`p % ${TENANTS}`)} AS t) x`)
  await pool.query(sql.unsafe`
    INSERT INTO sessions (id, tenant_id, proxy_number, state, direction_mode, grace_period_minutes, max_duration_minutes,
                          recording_enabled, consent_prompt, agent_phone_enc, customer_phone_enc, agent_hash, customer_hash,
                          expires_at, created_at, activated_at)
    SELECT ('0190b000-0000-7000-8000-' || lpad(to_hex(i), 12, '0'))::uuid,
           ${tenantIdSql(sql.fragment`(i % ${PROXIES}) % ${TENANTS}`)},
           '+1555' || lpad((i % ${PROXIES})::text, 7, '0'), 'ACTIVE', 'BIDIRECTIONAL', 15, 1440, false, 'DEFAULT',
           decode('0011223344556677889900112233445566778899', 'hex'), decode('0011223344556677889900112233445566778899', 'hex'),
           md5('a' || i), md5('c' || i), now() + interval '1 day', now(), now()
    FROM generate_series(0, ${SESSIONS - 1}) i`)
  await pool.query(sql.unsafe`
    INSERT INTO session_participants (proxy_number, party_hash, session_id)
    SELECT proxy_number, h, id FROM sessions, LATERAL (VALUES (agent_hash), (customer_hash)) v(h)`)
  if (REFUSED) {
    await pool.query(sql.unsafe`
      INSERT INTO session_participants (proxy_number, party_hash, session_id)
      SELECT proxy_number, ${TAKEN}, min(id::text)::uuid FROM sessions GROUP BY proxy_number`)
  }
  await pool.query(sql.unsafe`
    UPDATE tenants t SET live_sessions = c.n FROM (SELECT tenant_id, count(*)::int AS n FROM sessions GROUP BY tenant_id) c WHERE c.tenant_id = t.id`)
  await pool.query(sql.unsafe`VACUUM ANALYZE`)
  await pool.query(sql.unsafe`CHECKPOINT`)
}

let createNo = 0
const enc = randomBytes(40)
function args(at: number): CreateSessionArgs {
  const i = createNo++
  const p = (i * 7919) % PROXIES
  const tenantId = tenantIdOf(p % TENANTS)
  const id = uuidv7(at) as SessionId
  const rec: SessionRecord = {
    id, tenantId, proxyNumber: proxyOf(p), state: 'ACTIVE', directionMode: 'BIDIRECTIONAL', gracePeriodMinutes: 15,
    maxDurationMinutes: 120, recordingEnabled: false, consentPrompt: 'DEFAULT', agentPhone: '+15550000001' as E164,
    customerPhone: '+15550000002' as E164, createdAt: at, activatedAt: at, expiresAt: at + 120 * 60_000, endedAt: null,
    expiredAt: null, version: 1,
  }
  const data = { sessionId: id, tenantId, proxyNumber: rec.proxyNumber, state: 'ACTIVE' as const }
  return {
    rec, metadata: {}, agentHash: REFUSED ? TAKEN : randomBytes(21).toString('base64url'), customerHash: randomBytes(21).toString('base64url'),
    agentEnc: enc, customerEnc: enc, quota: 1_000_000_000,
    events: [newEnvelope('session.created', at, data), newEnvelope('session.activated', at, data)],
    ...(KEYED ? { idempotency: { key: `bench-${id}`, requestHash: 'h', status: 201, response: { id } } } : {}),
  }
}

async function timeRun(pool: DatabasePool, label: string): Promise<void> {
  for (let w = 0; w < 200; w++) await createSession(pool, args(Date.now())) // warm: named statement, plan cache, buffers
  const lat: number[] = []
  const cpu0 = cpuSnapshot(process.pid).postgres
  const direct = directPool(pool)!
  for (let k = 0; k < ROWS; k += BATCH) {
    const group = Array.from({ length: Math.min(BATCH, ROWS - k) }, () => args(Date.now()))
    const t0 = process.hrtime.bigint()
    if (group.length === 1) {
      const out = await createSession(pool, group[0]!)
      if (out !== (REFUSED ? 'proxy-conflict' : 'ok')) throw new Error(`a create answered ${JSON.stringify(out)}`)
    } else if (!(await createSessionsBatch(direct, group))) throw new Error('a batch wrote nothing')
    const us = Number(process.hrtime.bigint() - t0) / 1e3 / group.length
    for (const _ of group) lat.push(us)
  }
  const cpu1 = cpuSnapshot(process.pid).postgres
  lat.sort((a, b) => a - b)
  console.log(`bench: pg.create.us ${lat[Math.floor(lat.length / 2)]!.toFixed(1)} us  (${label}; p90 ${lat[Math.floor(lat.length * 0.9)]!.toFixed(1)} us)`)
  if (cpu1 - cpu0 > 0) console.log(`bench: pg.create.cpu_us ${(((cpu1 - cpu0) * 1e6) / ROWS).toFixed(1)} us  (${label})`)
}

// One create at a time: one connection is busy, whichever of the pool's it is.
await withScratchDatabase(url, `maskline_bench_create_${process.pid}`, KEEP, async db => {
  await migrate(db.pool)
  await seed(db.pool)
  console.log(`# ${SESSIONS} live sessions on ${PROXIES} proxy numbers, ${TENANTS} tenants; ${ROWS} creates per round${REFUSED ? ', each refused (a participant clash)' : ''}${BATCH > 1 ? `, in batches of ${BATCH}` : ''}${KEYED ? ', each with an Idempotency-Key' : ''}`)
  for (let r = 1; r <= ROUNDS; r++) await timeRun(db.pool, `round ${r}`)
  for (const step of STEPS) {
    await applyStep(db.pool, step)
    for (let r = 1; r <= ROUNDS; r++) await timeRun(db.pool, `${step.trim()}, round ${r}`)
  }
})
