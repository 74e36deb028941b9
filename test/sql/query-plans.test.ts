// Every query the API, analytics, the retention purge and the outbox dispatcher run on
// call_records, sms_records, outbox and the sessions lists stays on an index now that migration
// 005 thinned the write-hot tables; so does the console's session timeline (README.md, Operator console), audit_log
// included. Each query is captured as the code sends it (a recording Db in place of the pool),
// then EXPLAINed with its own parameters against tables holding enough rows (and statistics) for
// the planner to choose as it would in production. The plans are printed (t.comment): they are the
// EXPLAIN of each query the issue asks for.
import { createHash } from 'node:crypto'
import t from 'tap'
import { sql, type CommonQueryMethods, type QuerySqlToken } from 'slonik'
import { callSuccessRate, callsSummary, sessionsOverTime } from '../../sql/analytics.js'
import { sessionTimeline } from '../../sql/console.js'
import { getCall, getCallRecord, listCalls, listSessionCalls, listSessionSms } from '../../sql/records.js'
import { purgeOldRecords } from '../../sql/retention.js'
import { liveSelect } from '../../sql/session-load.js'
import { sessionChangesSince } from '../../sql/session-changes.js'
import { findLiveByPartyHash, findStickyProxy, getLastActivity, getSession, listSessions } from '../../sql/sessions.js'
import { claimDue, markDone, markRetry } from '../../sql/webhooks.js'
import { testDatabase } from '../support/db.js'

const TENANTS = 200
const SESSIONS = 20_000
const CALLS = 60_000
const SMS = 20_000
const OUTBOX = 40_000
const AUDIT = 20_000
const DAYS = 60
const DAY = 86_400_000
/** Every row lies in the last 60 days, [BASE, BASE + 60 days); queries ask for one day in the middle. */
const BASE = Math.floor(Date.now() / DAY) * DAY - (DAYS - 1) * DAY

const hex = (n: number, width: number) => n.toString(16).padStart(width, '0')
const md5 = (s: string) => createHash('md5').update(s).digest('hex')
const tenantOf = (k: number) => `0190a000-0000-7000-8000-${hex(k, 12)}`
const sessionOf = (i: number) => `0190b000-0000-7000-8000-${hex(i, 12)}`
/** SQL: a UUIDv7 (contract D2) at the epoch ms `ms`, unique by the integer `i`. */
const uuidv7Sql = (ms: string, i: string) =>
  `(lpad(to_hex((${ms})::bigint), 12, '0') || '7' || lpad(to_hex(${i} % 4096), 3, '0') || '8' || lpad(to_hex(${i}), 15, '0'))::uuid`
const tenantSql = (k: string) => `('0190a000-0000-7000-8000-' || lpad(to_hex(${k}), 12, '0'))::uuid`
const sessionSql = (i: string) => `('0190b000-0000-7000-8000-' || lpad(to_hex(${i}), 12, '0'))::uuid`

type Captured = QuerySqlToken

/**
 * A Db that records each query instead of running it (and answers as if nothing matched, or with
 * `one` for a single-row read and `rows` for a many-row read, so a function goes on to its next
 * query).
 */
function recorder(one: unknown = null, rows: readonly unknown[] = []): { db: CommonQueryMethods; queries: Captured[] } {
  const queries: Captured[] = []
  const take = (v: unknown) => async (q: Captured) => { queries.push(q); return v }
  const db = {
    any: take(rows), anyFirst: take([]), many: take([]), manyFirst: take([]), maybeOne: take(one), maybeOneFirst: take(null),
    one: take({}), oneFirst: take(0), exists: take(false), query: take({ rows: [], rowCount: 0, fields: [], command: 'SELECT', notices: [] }),
    transaction: async (fn: (tx: CommonQueryMethods) => Promise<unknown>) => fn(db as unknown as CommonQueryMethods),
  }
  return { db: db as unknown as CommonQueryMethods, queries }
}

/** The queries `run` sends (`one`: what a single-row read answers; `rows`: what `any` answers). */
async function capture(run: (db: CommonQueryMethods) => Promise<unknown>, one?: unknown, rows?: readonly unknown[]): Promise<Captured[]> {
  const r = recorder(one, rows)
  await run(r.db)
  if (r.queries.length === 0) throw new Error('the function sent no query')
  return r.queries
}

t.test('each query on the record tables, the outbox and the sessions lists uses its index', async t => {
  const db = await testDatabase(t)
  const pool = db.pool
  /** A statement built here from constants (slonik takes template-literal shaped input only). */
  const q = (s: string) => pool.query(sql.unsafe(Object.freeze(Object.assign([s], { raw: Object.freeze([s]) })) as unknown as TemplateStringsArray))
  const msAt = (frac: string) => `${BASE} + floor(${frac} * ${DAYS * DAY})`

  await q(`INSERT INTO tenants (id, name, salt) SELECT ${tenantSql('k')}, 'plans ' || k, '\\x00'::bytea FROM generate_series(0, ${TENANTS - 1}) k`)
  await q(`INSERT INTO proxy_numbers (number, region, tenant_id)
    SELECT '+1555' || lpad(i::text, 7, '0'), 'US', ${tenantSql(`i % ${TENANTS}`)} FROM generate_series(0, ${SESSIONS - 1}) i`)
  // Sessions over the 60 days, most of them over (as in a tenant's history), 5 % live.
  const sessionAt = msAt(`i::float8 / ${SESSIONS}`)
  await q(`INSERT INTO sessions (id, tenant_id, proxy_number, state, direction_mode, grace_period_minutes, max_duration_minutes,
      recording_enabled, consent_prompt, agent_phone_enc, customer_phone_enc, agent_hash, customer_hash, expires_at, created_at, activated_at)
    SELECT ${sessionSql('i')}, ${tenantSql(`i % ${TENANTS}`)}, '+1555' || lpad(i::text, 7, '0'),
           CASE WHEN i % 20 = 0 THEN 'ACTIVE' ELSE 'EXPIRED' END, 'BIDIRECTIONAL', 15, 1440, false, 'DEFAULT',
           '\\x00'::bytea, '\\x00'::bytea, md5('a' || i), md5('c' || i),
           to_timestamp((${sessionAt} + ${DAY}) / 1000.0), to_timestamp((${sessionAt}) / 1000.0), to_timestamp((${sessionAt}) / 1000.0)
    FROM generate_series(0, ${SESSIONS - 1}) i`)
  // Records of those sessions (several each), each id the UUIDv7 of its time, in time order.
  const ofSession = (n: number) => `(i * ${SESSIONS}::bigint / ${n})::int`
  const callAt = msAt(`i::float8 / ${CALLS}`)
  await q(`INSERT INTO call_records (id, session_id, tenant_id, provider_call_id, status, direction, duration_seconds, initiated_at, party_b_hash)
    SELECT ${uuidv7Sql(callAt, 'i')}, ${sessionSql(ofSession(CALLS))}, ${tenantSql(`${ofSession(CALLS)} % ${TENANTS}`)},
           'v3:plans-' || i, (ARRAY['COMPLETED','MISSED','FAILED','ANSWERED','RINGING'])[1 + i % 5], (ARRAY['A_TO_B','B_TO_A'])[1 + i % 2],
           i % 300, to_timestamp((${callAt}) / 1000.0), 'h'
    FROM generate_series(0, ${CALLS - 1}) i`)
  const smsAt = msAt(`i::float8 / ${SMS}`)
  await q(`INSERT INTO sms_records (id, session_id, tenant_id, provider_message_id, direction, status, sent_at)
    SELECT ${uuidv7Sql(smsAt, 'i')}, ${sessionSql(ofSession(SMS))}, ${tenantSql(`${ofSession(SMS)} % ${TENANTS}`)},
           'plans-' || i, 'A_TO_B', 'DELIVERED', to_timestamp((${smsAt}) / 1000.0)
    FROM generate_series(0, ${SMS - 1}) i`)
  // The outbox: delivered events, and the last 1 % still due.
  await q(`INSERT INTO outbox (id, tenant_id, session_id, type, envelope, created_at, next_attempt_at, done_at, outcome)
    SELECT ${uuidv7Sql(msAt(`i::float8 / ${OUTBOX}`), 'i')}, ${tenantSql(`${ofSession(OUTBOX)} % ${TENANTS}`)}, ${sessionSql(ofSession(OUTBOX))},
           'call.incoming', '{}'::jsonb, now(), now(),
           CASE WHEN i < ${OUTBOX * 0.99} THEN now() END, CASE WHEN i < ${OUTBOX * 0.99} THEN 'delivered' END
    FROM generate_series(0, ${OUTBOX - 1}) i`)
  // The audit log: target swaps of those sessions over the 60 days (updateSession's rows), and as
  // many rows of other actions.
  await q(`INSERT INTO audit_log (id, tenant_id, action, target_id, data, created_at)
    SELECT ${uuidv7Sql(msAt(`i::float8 / ${AUDIT}`), 'i')}, ${tenantSql(`${ofSession(AUDIT)} % ${TENANTS}`)},
           CASE WHEN i % 2 = 0 THEN 'session.target_swapped' ELSE 'tenant.updated' END, ${sessionSql(ofSession(AUDIT))},
           '{}'::jsonb, to_timestamp((${msAt(`i::float8 / ${AUDIT}`)}) / 1000.0)
    FROM generate_series(0, ${AUDIT - 1}) i`)
  await q('ANALYZE')

  const tenantId = tenantOf(3)
  const sessionId = sessionOf(10_003)
  const from = BASE + 30 * DAY, to = BASE + 31 * DAY
  const callId = (await pool.oneFirst(sql.unsafe`SELECT id FROM call_records WHERE tenant_id = ${tenantId} ORDER BY id LIMIT 1 OFFSET 100`)) as string
  const lease = { id: callId, lockedUntil: new Date(BASE).toISOString() }

  // The console timeline reads its session row first and goes on only if the tenant has it: the
  // recorder answers that read with the real row of an expired session, and of a live one.
  const timelineRow = async (id: string) => pool.one(sql.unsafe`SELECT state, created_at, activated_at, ended_at, expired_at FROM sessions WHERE id = ${id}`)
  const expiredSession = await timelineRow(sessionId)
  const liveId = sessionOf(10_000)
  const liveSession = await timelineRow(liveId)
  const expired = { ...expiredSession, expired_at: Number(expiredSession.created_at) + DAY }
  const timelineIndexes = { sessions: 'sessions_pkey', call_records: 'call_records_session', sms_records: 'sms_records_session_sent', audit_log: 'audit_log_tenant' }

  /** [what, the function's queries, table → the index each must use (alternatives separated by |)]. */
  const cases: [string, (db: CommonQueryMethods) => Promise<unknown>, Record<string, string>, unknown?][] = [
    ['GET /v1/calls', db => listCalls(db, { tenantId, limit: 50 }), { call_records: 'call_records_tenant_id' }],
    ['GET /v1/calls?after', db => listCalls(db, { tenantId, limit: 50, after: callId }), { call_records: 'call_records_tenant_id' }],
    // Filtered within the tenant: either tenant-first index serves (the planner takes the smaller).
    ['GET /v1/calls?status&direction', db => listCalls(db, { tenantId, limit: 50, status: 'MISSED', direction: 'B_TO_A' }), { call_records: 'call_records_tenant_id|call_records_tenant_initiated' }],
    ['GET /v1/calls?periodStart&periodEnd', db => listCalls(db, { tenantId, limit: 50, periodStart: from, periodEnd: to }), { call_records: 'call_records_tenant_initiated' }],
    ['GET /v1/calls?periodStart&periodEnd (ISO)', db => listCalls(db, { tenantId, limit: 50, periodStart: new Date(from).toISOString(), periodEnd: new Date(to).toISOString() }), { call_records: 'call_records_tenant_initiated' }],
    ['GET /v1/calls?sessionId', db => listCalls(db, { tenantId, limit: 50, sessionId }), { call_records: 'call_records_session' }],
    ['GET /v1/calls/:id', db => getCall(db, tenantId, callId), { call_records: 'call_records_pkey' }],
    ['GET /v1/sessions/:id/calls', db => listSessionCalls(db, { sessionId, limit: 50 }), { call_records: 'call_records_session' }],
    ['GET /v1/sessions/:id/calls?after', db => listSessionCalls(db, { sessionId, limit: 50, after: callId }), { call_records: 'call_records_session' }],
    ['callback: call by id', db => getCallRecord(db, { callId }), { call_records: 'call_records_pkey' }],
    ['callback: call by CallSid', db => getCallRecord(db, { providerCallId: 'v3:plans-77' }), { call_records: 'call_records_provider_call_id_key' }],
    ['GET /v1/sessions/:id/sms', db => listSessionSms(db, { sessionId, limit: 50 }), { sms_records: 'sms_records_session_sent' }],
    ['GET /v1/sessions/:id/sms?after', db => listSessionSms(db, { sessionId, limit: 50, after: `${new Date(to).toISOString()}_${callId}` }), { sms_records: 'sms_records_session_sent' }],
    ['analytics: call success rate', db => callSuccessRate(db, { tenantId, from, to, granularity: 'hour' }), { call_records: 'call_records_tenant_initiated' }],
    ['analytics: calls summary', db => callsSummary(db, { tenantId, from, to, status: 'COMPLETED' }), { call_records: 'call_records_tenant_initiated' }],
    ['analytics: sessions over time', db => sessionsOverTime(db, { tenantId, from, to, granularity: 'day' }), { sessions: 'sessions_tenant_created' }],
    ['GET /v1/sessions', db => listSessions(db, { tenantId, limit: 50 }), { sessions: 'sessions_tenant_created', call_records: 'call_records_session' }],
    ['GET /v1/sessions?after', db => listSessions(db, { tenantId, limit: 50, after: `${new Date(to).toISOString()}_${sessionId}` }), { sessions: 'sessions_tenant_created', call_records: 'call_records_session' }],
    ['GET /v1/sessions?state=EXPIRED', db => listSessions(db, { tenantId, limit: 50, state: 'EXPIRED' }), { sessions: 'sessions_tenant_state_created', call_records: 'call_records_session' }],
    // A live state: the live-only partial indexes that lead with tenant_id are smaller still.
    ['GET /v1/sessions?state=ACTIVE', db => listSessions(db, { tenantId, limit: 50, state: 'ACTIVE' }), { sessions: 'sessions_tenant_state_created|sessions_agent_hash' }],
    ['GET /v1/sessions/:id', db => getSession(db, tenantId, sessionId), { sessions: 'sessions_pkey', call_records: 'call_records_session' }],
    ['GET /v1/sessions/verify', db => findLiveByPartyHash(db, tenantId, 'ab'.repeat(32)), { sessions: 'sessions_agent_hash' }],
    // Migration 011: callCount / lastCallAt of each session read are its records, by session.
    // contract D10: a sticky create's one read (the pair's newest session of the last 30 days), and
    // the last activity an inactivity end is checked against (the session row, its newest SMS).
    ['POST /v1/sessions stickyProxy', db => findStickyProxy(db, { tenantId, agentHash: md5('a10003'), customerHash: md5('c10003'), since: from }), { sessions: 'sessions_pair_recent' }],
    ['inactivity: last activity', db => getLastActivity(db, sessionId), { sessions: 'sessions_pkey', call_records: 'call_records_session', sms_records: 'sms_records_session_sent' }],
    ['outbox: claim due events', db => claimDue(db, { limit: 100, leaseMs: 30_000, now: Date.now() }), { outbox: 'outbox_due' }],
    ['outbox: mark done', db => markDone(db, lease, 'delivered', Date.now()), { outbox: 'outbox_pkey' }],
    ['outbox: mark retry', db => markRetry(db, lease, Date.now()), { outbox: 'outbox_pkey' }],
    // A daily purge at 59 days' retention: the oldest day goes, its calls kept counted on their
    // sessions' rows (migration 011).
    ['retention purge', db => purgeOldRecords(db, DAYS - 1), { call_records: 'call_records_tenant_initiated', sms_records: 'sms_records_sent', sessions: 'sessions_pkey' }],
    // README.md, Operator console: the console's session timeline, never from the outbox: the session row, its calls
    // and SMS by session, its swaps in audit_log over the session's life (to now while it lives).
    ['console: timeline of an expired session', db => sessionTimeline(db, tenantId, sessionId, 200), timelineIndexes, expired],
    ['console: timeline of a live session', db => sessionTimeline(db, tenantOf(0), liveId, 200), timelineIndexes, liveSession],
  ]

  /** The plan of a captured query, with its own parameters (EXPLAIN without ANALYZE runs nothing). */
  const explain = async (query: Captured) =>
    (await pool.any({ ...query, sql: `EXPLAIN (COSTS OFF) ${query.sql}` } as Captured)).map(r => Object.values(r)[0] as string).join('\n')

  for (const [what, run, want, one] of cases) {
    const plans: string[] = []
    for (const query of await capture(run, one)) plans.push(await explain(query))
    const plan = plans.join('\n--\n')
    t.comment(`${what}\n${plan}`)
    for (const table of ['call_records', 'sms_records', 'outbox', 'sessions', 'audit_log']) {
      t.notMatch(plan, new RegExp(`Seq Scan on ${table}\\b`), `${what}: no Seq Scan on ${table}`)
    }
    for (const [table, index] of Object.entries(want)) {
      t.match(plan, new RegExp(`Index (Only )?Scan( Backward)? using (${index}) on ${table}\\b|Bitmap Index Scan on (${index})\\b`), `${what}: ${table} by ${index}`)
    }
  }
  // The claim's check that no earlier event of the session is still undelivered: by session.
  const claimPlan = await explain((await capture(db => claimDue(db, { limit: 100, leaseMs: 30_000, now: Date.now() })))[0]!)
  t.match(claimPlan, /using outbox_session on outbox|Bitmap Index Scan on outbox_session/, 'outbox claim: earlier events by outbox_session')
  // The boot's read of the live sessions (sql/session-load.ts): the table in page order, never a
  // partial index per page range (here, with 5 % of the sessions live, the planner would take
  // one), each session's call counters one probe of call_records_session (a planner setting
  // against the first once turned that probe into a scan of call_records per session).
  const bootText = `EXPLAIN (COSTS OFF) ${liveSelect(0, 64)}`
  const bootPlan = (await pool.anyFirst(sql.unsafe(Object.freeze(Object.assign([bootText], { raw: Object.freeze([bootText]) })) as unknown as TemplateStringsArray))).join('\n')
  t.comment(`boot: live sessions of pages [0, 64)\n${bootPlan}`)
  t.match(bootPlan, /Tid Range Scan on sessions/, 'boot: sessions in page order')
  t.match(bootPlan, /Index (Only )?Scan using call_records_session on call_records/, 'boot: call counters by call_records_session')
  t.notMatch(bootPlan, /Seq Scan on call_records/, 'boot: no scan of call_records')
  // The reconcile sweep (api/app/reconcile.ts): the sessions changed since the last watermark, by
  // sessions_change_xid (every create writes it: test/sql/migrate.test.ts, 014).
  // A watermark past the population, as a sweep's usually is: a new transaction id (the snapshot's
  // xmin would be held back by any transaction another test file has open, and a watermark before
  // the population matches every row, where a scan of the table is the right plan).
  const since = String(await pool.oneFirst(sql.unsafe`SELECT pg_current_xact_id()::text`))
  const swept = await capture(db => sessionChangesSince(db, since), undefined, [{ next: since, id: null, version: null, state: null }])
  const sweepPlan = await explain(swept[0]!)
  t.comment(`reconcile: sessions changed since ${since}\n${sweepPlan}`)
  t.match(sweepPlan, /Index (Only )?Scan using sessions_change_xid on sessions|Bitmap Index Scan on sessions_change_xid/, 'reconcile: changes by sessions_change_xid')
  // And the party lookup uses both party indexes.
  const verifyPlan = await explain((await capture(db => findLiveByPartyHash(db, tenantId, 'ab'.repeat(32))))[0]!)
  t.match(verifyPlan, /sessions_pair_recent/, 'verify: customers through sessions_pair_recent (migration 012 dropped sessions_customer_hash)')
})
