// Postgres work per recorded call: the real statement of sql/record-apply.ts for a
// batch of new calls (call rows and their call.incoming outbox rows; before migration 011 also one
// call_count update per session), sent as the record writer sends it (a named statement on the
// direct pool), timed on a scratch database next to DATABASE_URL, once on the schema before
// migration 005 and once on the schema after it.
//
//   DATABASE_URL=postgres://postgres@127.0.0.1:5432/test node --import tsx bench/pg-call-insert.bench.ts \
//     [--schema before|after|both] [--rows 20000] [--batch 80] [--prefill 200000] [--sessions 200000] [--webhooks] [--keep]
//     [--steps 'ALTER TABLE …; DROP INDEX …|…']
//
// --batch 80 is what a 10 ms group commit holds at 8,000 calls/s. --prefill writes that many calls
// first (then ANALYZE), so index descents and key checks meet tables of a realistic depth.
// --webhooks gives every tenant a webhook that wants call.incoming, so outbox rows stay due
// (indexed by the partial outbox indexes) instead of being written done.
//
// Prints, per schema:
//   bench: pg.call_insert.us_per_row <n> us        wall time of the statement (with its commit) per row, median batch
//   bench: pg.call_insert.cpu_us_per_row <n> us    CPU of the Postgres backend running it, per row (from /proc)
// The CPU figure needs Postgres on this machine (it reads /proc/<backend pid>/stat); it is left out
// otherwise. The scratch databases are dropped at the end (--keep leaves them, for EXPLAIN);
// existing databases are never touched.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { sql, type DatabasePool } from 'slonik'
import { newEnvelope } from '../sql/vocabulary/event-envelope.js'
import { uuidv7 } from '../sql/vocabulary/ids.js'
import { migrate, readMigrations, splitSqlStatements } from '../sql/migrate.js'
import { directPool } from '../sql/direct.js'
import { applyOps } from '../sql/record-apply.js'
import type { CallCache, OpData } from '../sql/record-ops.js'
import { tenantIdOf } from './lib/population.js'
import { applyStep, rawSql, requireDatabaseUrl, scriptArgs, seedTenants, tenantIdSql, withScratchDatabase } from './lib/script.js'

const { opt, num, flag } = scriptArgs()
const ROWS = num('--rows', 20_000)
const BATCH = num('--batch', 80)
const PREFILL = num('--prefill', 200_000)
const SESSIONS = num('--sessions', 200_000)
const TENANTS = 50
const WEBHOOKS = flag('--webhooks')
const KEEP = flag('--keep')
/** --steps 'SQL;SQL|SQL': after the first timing, each step (|-separated) is applied and timed again. */
const STEPS = flag('--steps') ? opt('--steps', '').split('|').filter(x => x.trim()) : []
const schemas = opt('--schema', 'both') === 'both' ? ['before', 'after'] as const : [opt('--schema', 'both') as 'before' | 'after']

const url = requireDatabaseUrl()

const CLK_TCK = 100 // USER_HZ on Linux
/** utime + stime of a process in µs, or null when it is not visible from here. */
function cpuUs(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return ((Number(f[11]) + Number(f[12])) * 1e6) / CLK_TCK
  } catch {
    return null
  }
}

const sessionOf = (i: number) => `0190b000-0000-7000-8000-${i.toString(16).padStart(12, '0')}`
const noCache: CallCache = { get: () => undefined, bySid: () => undefined }

async function seed(pool: DatabasePool): Promise<void> {
  await seedTenants(pool, TENANTS)
  await pool.query(sql.unsafe`
    INSERT INTO proxy_numbers (number, region, tenant_id, live_sessions)
    SELECT '+1555' || lpad(p::text, 7, '0'), 'US', ${tenantIdSql(sql.fragment`p % ${TENANTS}`)}, 1
    FROM generate_series(0, ${SESSIONS - 1}) p`)
  await pool.query(sql.unsafe`
    INSERT INTO sessions (id, tenant_id, proxy_number, state, direction_mode, grace_period_minutes, max_duration_minutes,
                          recording_enabled, consent_prompt, agent_phone_enc, customer_phone_enc, agent_hash, customer_hash,
                          expires_at, created_at, activated_at)
    SELECT ('0190b000-0000-7000-8000-' || lpad(to_hex(i), 12, '0'))::uuid,
           ${tenantIdSql(sql.fragment`i % ${TENANTS}`)},
           '+1555' || lpad(i::text, 7, '0'), 'ACTIVE', 'BIDIRECTIONAL', 15, 1440, false, 'DEFAULT',
           decode('0011223344556677889900112233445566778899', 'hex'), decode('0011223344556677889900112233445566778899', 'hex'),
           md5('a' || i), md5('c' || i), now() + interval '1 day', now(), now()
    FROM generate_series(0, ${SESSIONS - 1}) i`)
  if (WEBHOOKS) {
    await pool.query(sql.unsafe`
      INSERT INTO webhook_configs (tenant_id, url, events, secret_enc)
      SELECT id, 'https://hooks.example/bench', ARRAY['call.incoming'], decode('00', 'hex') FROM tenants`)
  }
}

let callNo = 0
function batchOps(n: number, at: number): OpData[] {
  const ops: OpData[] = []
  for (let k = 0; k < n; k++) {
    const i = callNo++
    const s = (i * 7919) % SESSIONS // spread over sessions, rarely two of one session in a batch
    const sessionId = sessionOf(s), tenantId = tenantIdOf(s % TENANTS), proxy = '+1555' + String(s).padStart(7, '0')
    const id = uuidv7(at)
    ops.push({
      kind: 'call',
      row: { id, sessionId, tenantId, providerCallId: `v3:bench-${i}`, status: 'RINGING', direction: 'A_TO_B', initiatedAt: at, partyBHash: 'h'.repeat(43), proxy },
      events: [newEnvelope('call.incoming', at, { sessionId, tenantId, proxyNumber: proxy, callId: id, direction: 'A_TO_B', status: 'RINGING', durationSeconds: 0 })],
    })
  }
  return ops
}

async function prefill(pool: DatabasePool): Promise<void> {
  const step = 2_000
  for (let done = 0; done < PREFILL; done += step) await applyOps(pool, batchOps(Math.min(step, PREFILL - done), Date.now()), noCache)
  await pool.query(sql.unsafe`VACUUM ANALYZE`)
  await pool.query(sql.unsafe`CHECKPOINT`)
}

/**
 * Times ROWS rows in batches of BATCH on one connection and prints the figures under `label`.
 * The batches go as the record writer sends them (sql/record-writer.ts): through the direct `pg`
 * pool, as a named statement parsed once per connection. Through slonik's pool the statement was
 * parsed and planned anew for every batch, ~0.8 ms of backend CPU a batch that the service never
 * pays (a batch of one row cost 900 µs).
 */
async function timeRun(pool: DatabasePool, label: string): Promise<void> {
  const direct = directPool(pool)
  if (!direct?.named) throw new Error('pg-call-insert needs a real Postgres (named statements on the direct pool)')
  const q = direct.queries
  const backend = (await q.oneFirst(sql.unsafe`SELECT pg_backend_pid()`)) as number
  for (let w = 0; w < 50; w++) await applyOps(q, batchOps(BATCH, Date.now()), noCache) // warm: plan cache, buffers
  const perBatch: number[] = []
  const cpu0 = cpuUs(backend)
  let rows = 0
  while (rows < ROWS) {
    const ops = batchOps(BATCH, Date.now())
    const t0 = process.hrtime.bigint()
    const out = await applyOps(q, ops, noCache)
    perBatch.push(Number(process.hrtime.bigint() - t0) / 1e3 / BATCH)
    if (out.results.some((r, i) => r !== (ops[i] as Extract<OpData, { kind: 'call' }>).row.id)) throw new Error('a call was not inserted')
    rows += BATCH
  }
  const cpu1 = cpuUs(backend)
  if ((await q.oneFirst(sql.unsafe`SELECT pg_backend_pid()`)) !== backend) throw new Error('the direct pool changed connections: the CPU figure would be of the wrong backend')
  perBatch.sort((a, b) => a - b)
  const median = perBatch[Math.floor(perBatch.length / 2)]!
  const count = async (table: string) => (await pool.oneFirst(sql.unsafe`SELECT count(*) FROM ${sql.identifier([table])}`)) as number
  const fks = (await pool.anyFirst(sql.unsafe`
    SELECT conrelid::regclass || '.' || conname FROM pg_constraint
    WHERE contype = 'f' AND conrelid::regclass::text IN ('call_records', 'sms_records', 'outbox') ORDER BY 1`)) as readonly string[]
  const indexes = (await pool.anyFirst(sql.unsafe`
    SELECT indexrelid::regclass::text FROM pg_index WHERE indrelid = 'call_records'::regclass ORDER BY 1`)) as readonly string[]
  console.log(`# ${label}: ${await count('call_records')} call rows, ${await count('outbox')} outbox rows after the run; batches of ${BATCH}, ${rows} rows timed`)
  console.log(`#   call_records indexes: ${indexes.join(', ')}`)
  console.log(`#   foreign keys on call_records/sms_records/outbox: ${fks.length ? fks.join(', ') : 'none'}`)
  console.log(`bench: pg.call_insert.us_per_row ${median.toFixed(1)} us  (${label}; p90 ${perBatch[Math.floor(perBatch.length * 0.9)]!.toFixed(1)} us)`)
  if (cpu0 !== null && cpu1 !== null) console.log(`bench: pg.call_insert.cpu_us_per_row ${((cpu1 - cpu0) / rows).toFixed(1)} us  (${label})`)
}

async function measure(schema: 'before' | 'after'): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'maskline-bench-migrations-'))
  for (const m of readMigrations()) if (schema === 'after' || m.version < '005') writeFileSync(join(dir, m.name), m.text)
  // One connection, as the record writer's batches are serial: its backend is the one timed.
  try {
    await withScratchDatabase(url, `maskline_bench_call_insert_${process.pid}_${schema}`, KEEP, async db => {
      await migrate(db.pool, dir)
      // Today's insert statement calls 005's refusal function: the old schema gets that function
      // alone, keeping its keys and indexes (so `before` also pays the statement's session check).
      if (schema === 'before') {
        const m005 = readMigrations().find(m => m.version === '005')
        for (const st of m005 ? splitSqlStatements(m005.text) : []) if (/^\s*(--[^\n]*\n\s*)*CREATE FUNCTION/.test(st)) await db.pool.query(rawSql(st))
      }
      await seed(db.pool)
      callNo = 0
      await prefill(db.pool)
      await timeRun(db.pool, `schema ${schema}`)
      // --steps: each statement applied in turn to the same database, then timed again.
      for (const step of STEPS) {
        await applyStep(db.pool, step)
        await timeRun(db.pool, `schema ${schema} + ${step.trim()}`)
      }
    })
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

for (const s of schemas) await measure(s)
