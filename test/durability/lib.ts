// Shared by the durability tests: a snapshot of everything the session store keeps, the
// invariants that must hold in every committed state (nothing half-applied), and voice routing
// as the provider sees it.
import { sql, type DatabasePool } from 'slonik'
import type { CallbackDriver } from '../support/callback-driver.js'
import { request } from '../support/child-service.js'
import { callsJoin } from '../../sql/call-count.js'

export const LIVE = new Set(['PENDING', 'ACTIVE', 'GRACE_PERIOD'])

export interface SessionRow {
  id: string
  tenantId: string
  proxy: string
  state: string
  agentHash: string
  customerHash: string
  version: number
  expiresAt: number
  endedAt: number | null
  expiredAt: number | null
  gracePeriodMinutes: number
  callCount: number
}

export interface Snapshot {
  /** now() of the database when the snapshot was read (epoch ms). */
  dbNow: number
  sessions: Map<string, SessionRow>
  participants: Array<{ proxy: string; hash: string; sessionId: string }>
  tenants: Map<string, { live: number; salt: Buffer }>
  proxies: Map<string, { tenantId: string | null; lastTenantId: string | null; live: number; releasedAt: number | null }>
  /** session id → event type → outbox rows. */
  events: Map<string, Map<string, number>>
  /** Outbox rows naming a session that does not exist. */
  orphanEvents: Array<{ type: string; sessionId: string }>
  /** session id → audit rows (session.target_swapped). */
  swapAudits: Map<string, number>
  /** `${tenantId} ${key}` → the session id of the stored 201 answer. */
  idempotency: Map<string, string>
  /** session id → session_created billing rows. */
  billedCreates: Map<string, number>
  /** provider_call_id of every call record. */
  callSids: Set<string>
  /** session id → call records. */
  callRecords: Map<string, number>
  /** Call and SMS records whose session (of the record's tenant) does not exist: no key refuses them (migration 016). */
  orphanRecords: string[]
}

export async function snapshot(pool: DatabasePool): Promise<Snapshot> {
  return pool.transaction(async tx => {
    // One consistent view of the whole store.
    await tx.query(sql.unsafe`SET TRANSACTION ISOLATION LEVEL REPEATABLE READ`)
    const dbNow = await tx.oneFirst(sql.unsafe`SELECT now()`) as number
    const sessions = new Map<string, SessionRow>()
    for (const r of await tx.any(sql.unsafe`
      SELECT id, tenant_id, proxy_number, state, agent_hash, customer_hash, version, expires_at, ended_at, expired_at, grace_period_minutes, calls.call_count
      FROM sessions ${callsJoin()}`) as readonly Record<string, any>[]) {
      sessions.set(r['id'], {
        id: r['id'], tenantId: r['tenant_id'], proxy: r['proxy_number'], state: r['state'], agentHash: r['agent_hash'],
        customerHash: r['customer_hash'], version: r['version'], expiresAt: r['expires_at'], endedAt: r['ended_at'],
        expiredAt: r['expired_at'], gracePeriodMinutes: r['grace_period_minutes'], callCount: r['call_count'],
      })
    }
    const participants = (await tx.any(sql.unsafe`SELECT proxy_number, party_hash, session_id FROM session_participants`) as readonly Record<string, any>[])
      .map(r => ({ proxy: r['proxy_number'] as string, hash: r['party_hash'] as string, sessionId: r['session_id'] as string }))
    const tenants = new Map<string, { live: number; salt: Buffer }>()
    for (const r of await tx.any(sql.unsafe`SELECT id, live_sessions, salt FROM tenants`) as readonly Record<string, any>[]) {
      tenants.set(r['id'], { live: r['live_sessions'], salt: Buffer.from(r['salt']) })
    }
    const proxies = new Map<string, { tenantId: string | null; lastTenantId: string | null; live: number; releasedAt: number | null }>()
    for (const r of await tx.any(sql.unsafe`SELECT number, tenant_id, last_tenant_id, live_sessions, released_at FROM proxy_numbers`) as readonly Record<string, any>[]) {
      proxies.set(r['number'], { tenantId: r['tenant_id'], lastTenantId: r['last_tenant_id'], live: r['live_sessions'], releasedAt: r['released_at'] })
    }
    const events = new Map<string, Map<string, number>>()
    const orphanEvents: Array<{ type: string; sessionId: string }> = []
    for (const r of await tx.any(sql.unsafe`
      SELECT o.session_id, o.type, count(*)::int AS n, bool_and(s.id IS NULL) AS orphan
      FROM outbox o LEFT JOIN sessions s ON s.id = o.session_id
      WHERE o.session_id IS NOT NULL GROUP BY o.session_id, o.type`) as readonly Record<string, any>[]) {
      if (r['orphan']) orphanEvents.push({ type: r['type'], sessionId: r['session_id'] })
      let m = events.get(r['session_id'])
      if (!m) events.set(r['session_id'], m = new Map())
      m.set(r['type'], r['n'])
    }
    const swapAudits = new Map<string, number>()
    for (const r of await tx.any(sql.unsafe`
      SELECT target_id, count(*)::int AS n FROM audit_log WHERE action = 'session.target_swapped' GROUP BY target_id`) as readonly Record<string, any>[]) {
      swapAudits.set(r['target_id'], r['n'])
    }
    const idempotency = new Map<string, string>()
    for (const r of await tx.any(sql.unsafe`SELECT tenant_id, key, response->>'id' AS id FROM idempotency_keys`) as readonly Record<string, any>[]) {
      idempotency.set(`${r['tenant_id']} ${r['key']}`, r['id'])
    }
    const billedCreates = new Map<string, number>()
    for (const r of await tx.any(sql.unsafe`
      SELECT session_id, count(*)::int AS n FROM billing_events WHERE metric = 'session_created' GROUP BY session_id`) as readonly Record<string, any>[]) {
      billedCreates.set(r['session_id'], r['n'])
    }
    const callSids = new Set(await tx.anyFirst(sql.unsafe`SELECT provider_call_id FROM call_records`) as readonly string[])
    const callRecords = new Map<string, number>()
    for (const r of await tx.any(sql.unsafe`SELECT session_id, count(*)::int AS n FROM call_records GROUP BY session_id`) as readonly Record<string, any>[]) {
      callRecords.set(r['session_id'], r['n'])
    }
    const orphanRecords = await tx.anyFirst(sql.unsafe`
      SELECT r.kind || ' ' || r.id FROM (SELECT 'call' AS kind, id, session_id, tenant_id FROM call_records
                                         UNION ALL SELECT 'sms', id, session_id, tenant_id FROM sms_records) r
      LEFT JOIN sessions s ON s.id = r.session_id AND s.tenant_id = r.tenant_id WHERE s.id IS NULL`) as readonly string[]
    return { dbNow, sessions, participants, tenants, proxies, events, orphanEvents, swapAudits, idempotency, billedCreates, callSids, callRecords, orphanRecords: [...orphanRecords] }
  })
}

export function eventCount(s: Snapshot, sessionId: string, type: string): number {
  return s.events.get(sessionId)?.get(type) ?? 0
}

export interface Assert {
  same(found: any, wanted: any, message: string): unknown
}

/** At most this many violations are printed per invariant. */
const SHOW = 15

/**
 * What must hold in every committed state, whatever was in flight when the process died:
 * - a live session has exactly its two participant rows (agent, current customer) on its proxy,
 *   an ended one none, and no participant row belongs to anything else;
 * - tenants.live_sessions and proxy_numbers.live_sessions count the live sessions; a proxy with
 *   live sessions is held by their (single) tenant, one without is held by nobody;
 * - every session has exactly one session.created, one session.activated and one session_created
 *   billing row; session.expired exactly when EXPIRED; one session.target_swapped per swap audit
 *   row; no outbox row for a session that does not exist.
 */
export function checkInvariants(t: Assert, s: Snapshot, label: string): void {
  const parts = new Map<string, Array<{ proxy: string; hash: string }>>()
  for (const p of s.participants) {
    let a = parts.get(p.sessionId)
    if (!a) parts.set(p.sessionId, a = [])
    a.push(p)
  }
  const participantProblems: string[] = []
  for (const x of s.sessions.values()) {
    const got = (parts.get(x.id) ?? []).map(p => `${p.proxy}/${p.hash}`).sort()
    const want = LIVE.has(x.state) ? [`${x.proxy}/${x.agentHash}`, `${x.proxy}/${x.customerHash}`].sort() : []
    if (JSON.stringify(got) !== JSON.stringify(want)) participantProblems.push(`${x.id} (${x.state}): participants ${JSON.stringify(got)}, want ${JSON.stringify(want)}`)
  }
  for (const id of parts.keys()) if (!s.sessions.has(id)) participantProblems.push(`participant rows of unknown session ${id}`)
  t.same(participantProblems.slice(0, SHOW), [], `${label}: every live session has exactly its 2 participant rows, ended ones none`)

  const liveByTenant = new Map<string, number>()
  const liveByProxy = new Map<string, { n: number; tenants: Set<string> }>()
  for (const x of s.sessions.values()) {
    if (!LIVE.has(x.state)) continue
    liveByTenant.set(x.tenantId, (liveByTenant.get(x.tenantId) ?? 0) + 1)
    let p = liveByProxy.get(x.proxy)
    if (!p) liveByProxy.set(x.proxy, p = { n: 0, tenants: new Set() })
    p.n++
    p.tenants.add(x.tenantId)
  }
  const tenantProblems: string[] = []
  for (const [id, tn] of s.tenants) {
    const n = liveByTenant.get(id) ?? 0
    if (tn.live !== n) tenantProblems.push(`tenant ${id}: live_sessions ${tn.live}, live sessions ${n}`)
  }
  t.same(tenantProblems.slice(0, SHOW), [], `${label}: tenants.live_sessions equals the count of live sessions`)

  const proxyProblems: string[] = []
  for (const [num, p] of s.proxies) {
    const l = liveByProxy.get(num)
    const n = l?.n ?? 0
    if (p.live !== n) proxyProblems.push(`${num}: live_sessions ${p.live}, live sessions ${n}`)
    if (l && l.tenants.size !== 1) proxyProblems.push(`${num}: live sessions of ${l.tenants.size} tenants`)
    const holder = l && l.tenants.size === 1 ? [...l.tenants][0]! : null
    if (p.tenantId !== holder) proxyProblems.push(`${num}: held by ${p.tenantId}, live sessions of ${holder}`)
    if (n === 0 && p.lastTenantId !== null && p.releasedAt === null) proxyProblems.push(`${num}: used, idle, but no released_at (no cooldown)`)
  }
  t.same(proxyProblems.slice(0, SHOW), [], `${label}: proxy_numbers live_sessions / holder consistent with the live sessions`)

  const eventProblems: string[] = []
  for (const x of s.sessions.values()) {
    for (const type of ['session.created', 'session.activated']) {
      const n = eventCount(s, x.id, type)
      if (n !== 1) eventProblems.push(`${x.id}: ${n} × ${type}`)
    }
    const expired = eventCount(s, x.id, 'session.expired')
    if (expired !== (x.state === 'EXPIRED' ? 1 : 0)) eventProblems.push(`${x.id} (${x.state}): ${expired} × session.expired`)
    const swapped = eventCount(s, x.id, 'session.target_swapped')
    if (swapped !== (s.swapAudits.get(x.id) ?? 0)) eventProblems.push(`${x.id}: ${swapped} × session.target_swapped, ${s.swapAudits.get(x.id) ?? 0} audit rows`)
    const billed = s.billedCreates.get(x.id) ?? 0
    if (billed !== 1) eventProblems.push(`${x.id}: ${billed} session_created billing rows`)
  }
  for (const o of s.orphanEvents) eventProblems.push(`outbox ${o.type} for session ${o.sessionId}, which does not exist`)
  for (const id of s.swapAudits.keys()) if (!s.sessions.has(id)) eventProblems.push(`swap audit of unknown session ${id}`)
  for (const id of s.billedCreates.keys()) if (id !== null && !s.sessions.has(id)) eventProblems.push(`session_created billed for unknown session ${id}`)
  for (const r of s.orphanRecords) eventProblems.push(`${r} record of a session that does not exist (or of another tenant)`)
  t.same(eventProblems.slice(0, SHOW), [], `${label}: outbox, audit, billing and record rows exist exactly for committed changes`)
}

// ---------------------------------------------------------------------------------------------
// Voice routing as the provider sees it.

export type Route = { kind: 'connect'; to: string } | { kind: 'dead' } | { kind: 'other'; text: string }

export function parseRoute(xml: string): Route {
  const n = /<Dial[^>]*>(?:(?!<\/Dial>).)*<Number[^>]*>(\+\d+)<\/Number>/s.exec(xml)
  if (n) return { kind: 'connect', to: n[1]! }
  if (/<Say>[^<]*not in service[^<]*<\/Say><Hangup\/>/.test(xml)) return { kind: 'dead' }
  return { kind: 'other', text: xml.slice(0, 300) }
}

export function routeLabel(r: Route): string {
  return r.kind === 'connect' ? `connect ${r.to}` : r.kind === 'dead' ? 'DEAD_LINE' : `other: ${r.text}`
}

let calls = 0

/** POST /v1/webhooks/cpaas/voice from `from` to `proxy`; the answer, parsed, and the CallSid sent. */
export async function voiceRoute(driver: CallbackDriver, from: string, proxy: string): Promise<Route & { callSid: string }> {
  const callSid = `durable-${process.pid}-${++calls}`
  const r = await driver.voice({ from, to: proxy, callSid })
  const text = await r.text()
  if (r.status !== 200) return { kind: 'other', text: `HTTP ${r.status} ${text.slice(0, 200)}`, callSid }
  return { ...parseRoute(text), callSid }
}

/** Runs fn over items with at most `n` at a time. */
export async function mapLimit<T, R>(items: readonly T[], n: number, fn: (item: T, i: number) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length)
  let next = 0
  await Promise.all(Array.from({ length: Math.min(n, items.length) }, async () => {
    for (let i = next++; i < items.length; i = next++) out[i] = await fn(items[i]!, i)
  }))
  return out
}

/** Fictional numbers (+1 415 555 XXXX); each call hands out a new one. */
export function phoneSource(start = 1000): () => string {
  let i = start
  return () => {
    if (i > 9999) throw new Error('out of fictional numbers')
    return `+1415555${String(i++).padStart(4, '0')}`
  }
}

export interface Sess { id: string; proxy: string; agent: string; customer: string }

/** `n` sessions of one tenant through the API, each between two new fictional parties. */
export async function createSessions(url: string, token: string, n: number, phone: () => string): Promise<Sess[]> {
  const sessions: Sess[] = []
  for (let i = 0; i < n; i++) {
    const agent = phone(), customer = phone()
    const r = await request(url, 'POST', '/v1/sessions', { token, body: { agentPhone: agent, customerPhone: customer } })
    if (r.status !== 201) throw new Error(`create → ${r.status} ${r.text}`)
    sessions.push({ id: r.body.id, proxy: r.body.proxyNumber, agent, customer })
  }
  return sessions
}

// ---------------------------------------------------------------------------------------------
// The webhook outbox and delivery log, as the dispatcher left them.

export interface OutboxRow {
  id: string
  sessionId: string | null
  type: string
  envelope: { id: string; type: string; createdAt: string; data: Record<string, unknown> }
  /** Claims so far (a claim counts as an attempt, so one cut short by a crash does too). */
  attempts: number
  outcome: string | null
  /** Not done, and its lease has not lapsed by the database's now(). */
  leased: boolean
}

/** Every outbox row, in id (= creation) order. */
export async function outboxRows(pool: DatabasePool): Promise<OutboxRow[]> {
  const rows = await pool.any(sql.unsafe`
    SELECT id, session_id, type, envelope, attempts, outcome,
      (done_at IS NULL AND locked_until IS NOT NULL AND locked_until > now()) AS leased
    FROM outbox ORDER BY id`) as readonly Record<string, any>[]
  return rows.map(r => ({
    id: r['id'], sessionId: r['session_id'], type: r['type'],
    envelope: typeof r['envelope'] === 'string' ? JSON.parse(r['envelope']) : r['envelope'],
    attempts: Number(r['attempts']), outcome: r['outcome'], leased: r['leased'],
  }))
}

/** Every webhook_deliveries row (one per recorded attempt), oldest first. */
export async function deliveryRows(pool: DatabasePool): Promise<Array<{ eventId: string; success: boolean; statusCode: number; attemptCount: number; error: string | null }>> {
  const rows = await pool.any(sql.unsafe`
    SELECT event_id, success, status_code, attempt_count, error FROM webhook_deliveries ORDER BY requested_at, id`) as readonly Record<string, any>[]
  return rows.map(r => ({ eventId: r['event_id'], success: r['success'], statusCode: Number(r['status_code']), attemptCount: Number(r['attempt_count']), error: r['error'] }))
}

// ---------------------------------------------------------------------------------------------
// Waiting for what is written behind an answer, and calls as the provider walks them (contract D5).

/**
 * Reads `read` until `ok` accepts its value or `timeoutMs` passes (every `intervalMs`); returns
 * the last value read either way, so the caller asserts on it and prints the evidence.
 */
export async function eventually<T>(read: () => Promise<T>, ok: (v: T) => boolean, o: { timeoutMs?: number; intervalMs?: number } = {}): Promise<{ value: T; ok: boolean; ms: number }> {
  const started = Date.now()
  const until = started + (o.timeoutMs ?? 30_000)
  for (;;) {
    let value: T
    try {
      value = await read()
    } catch (err) {
      // The database may still be coming back.
      if (Date.now() > until) throw err
      await new Promise(r => setTimeout(r, o.intervalMs ?? 100))
      continue
    }
    if (ok(value) || Date.now() > until) return { value, ok: ok(value), ms: Date.now() - started }
    await new Promise(r => setTimeout(r, o.intervalMs ?? 100))
  }
}

/** The callId the TeXML answer put into its callback URLs (none: not a Dial of a call record). */
export function callIdOf(texml: string): string | null {
  return /callId=([0-9a-f-]{36})/.exec(texml)?.[1] ?? null
}

export interface LegStatus {
  callId: string
  /** The child (bridged) leg's CallSid. */
  legSid: string
  /** The inbound CallSid of the voice fetch. */
  parentCallSid: string
  proxy: string
  /** The party the Dial called. */
  called: string
  callStatus: string
  callDuration?: number
}

/**
 * POST /voice/status?callId= for the child leg, with what a TeXML provider puts in it: the leg
 * goes from the proxy (the Dial's callerId) to the called party, its parent is the inbound call.
 */
export function legStatus(driver: CallbackDriver, p: LegStatus, signal?: AbortSignal): Promise<Response> {
  return postSigned(driver, `/voice/status?callId=${encodeURIComponent(p.callId)}`, {
    CallSid: p.legSid, ParentCallSid: p.parentCallSid, From: p.proxy, To: p.called, Direction: 'outbound-dial',
    CallStatus: p.callStatus, CallDuration: p.callDuration,
  }, signal)
}

export interface DialStatus {
  callId: string
  /** The inbound CallSid of the voice fetch. */
  callSid: string
  legSid?: string
  caller: string
  proxy: string
  dialCallStatus: string
  dialCallDuration?: number
}

/** POST /voice/dial-status?callId= (the Dial action): the inbound call's form, From = caller, To = proxy. */
export function dialAction(driver: CallbackDriver, p: DialStatus, signal?: AbortSignal): Promise<Response> {
  return postSigned(driver, `/voice/dial-status?callId=${encodeURIComponent(p.callId)}`, {
    CallSid: p.callSid, From: p.caller, To: p.proxy, Direction: 'inbound', CallStatus: 'in-progress',
    DialCallStatus: p.dialCallStatus, DialCallSid: p.legSid, DialCallDuration: p.dialCallDuration,
  }, signal)
}

/** CallbackDriver.postForm, with an optional abort signal (a callback the service never answers). */
async function postSigned(driver: CallbackDriver, subPath: string, fields: Record<string, string | number | undefined>, signal?: AbortSignal): Promise<Response> {
  if (!signal) return driver.postForm(subPath, fields)
  return Promise.race([
    driver.postForm(subPath, fields),
    new Promise<never>((_, reject) => {
      if (signal.aborted) reject(signal.reason)
      signal.addEventListener('abort', () => reject(signal.reason), { once: true })
    }),
  ])
}

/** A call the test walked to COMPLETED, as the provider saw it. */
export interface WalkedCall {
  callId: string
  sessionId: string
  durationSeconds: number
}

export interface CallFacts {
  /** callId → its record (by primary key). */
  records: Map<string, { sessionId: string; status: string; durationSeconds: number; callSid: string }>
  /** callId → event type → outbox rows naming it. */
  events: Map<string, Map<string, number>>
  /** callId → the data of its call.ended / call.failed events. */
  ended: Map<string, Array<Record<string, unknown>>>
  /** callId → billing rows with dedupe_key `call_minute:<callId>` (quantities). */
  minutes: Map<string, number[]>
  /** session id → call records, and the callCount the store reports (sql/call-count.ts). */
  sessions: Map<string, { records: number; callCount: number }>
}

/** What the database holds for these calls and their sessions. */
export async function callFacts(pool: DatabasePool, callIds: readonly string[], sessionIds: readonly string[]): Promise<CallFacts> {
  const ids = sql.array([...callIds], 'uuid')
  const records = new Map<string, { sessionId: string; status: string; durationSeconds: number; callSid: string }>()
  for (const r of await pool.any(sql.unsafe`SELECT id, session_id, status, duration_seconds, provider_call_id FROM call_records WHERE id = ANY(${ids})`) as readonly Record<string, any>[]) {
    records.set(r['id'], { sessionId: r['session_id'], status: r['status'], durationSeconds: Number(r['duration_seconds']), callSid: r['provider_call_id'] })
  }
  const events = new Map<string, Map<string, number>>()
  const ended = new Map<string, Array<Record<string, unknown>>>()
  for (const r of await pool.any(sql.unsafe`
    SELECT envelope->'data'->>'callId' AS call_id, type, envelope->'data' AS data FROM outbox
    WHERE envelope->'data'->>'callId' = ANY(${sql.array([...callIds], 'text')})`) as readonly Record<string, any>[]) {
    let m = events.get(r['call_id'])
    if (!m) events.set(r['call_id'], m = new Map())
    m.set(r['type'], (m.get(r['type']) ?? 0) + 1)
    if (r['type'] === 'call.ended' || r['type'] === 'call.failed') {
      const data = typeof r['data'] === 'string' ? JSON.parse(r['data']) : r['data']
      ended.set(r['call_id'], [...(ended.get(r['call_id']) ?? []), data])
    }
  }
  const minutes = new Map<string, number[]>()
  for (const r of await pool.any(sql.unsafe`
    SELECT dedupe_key, quantity::float8 AS q FROM billing_events WHERE dedupe_key = ANY(${sql.array(callIds.map(id => `call_minute:${id}`), 'text')})`) as readonly Record<string, any>[]) {
    const id = String(r['dedupe_key']).slice('call_minute:'.length)
    minutes.set(id, [...(minutes.get(id) ?? []), Number(r['q'])])
  }
  const sessions = new Map<string, { records: number; callCount: number }>()
  for (const r of await pool.any(sql.unsafe`
    SELECT s.id, calls.call_count, (SELECT count(*) FROM call_records c WHERE c.session_id = s.id)::int AS records
    FROM sessions s ${callsJoin(sql.fragment`s`)} WHERE s.id = ANY(${sql.array([...sessionIds], 'uuid')})`) as readonly Record<string, any>[]) {
    sessions.set(r['id'], { records: Number(r['records']), callCount: Number(r['call_count']) })
  }
  return { records, events, ended, minutes, sessions }
}

/**
 * Everything that differs from: each call has exactly one record, COMPLETED with the duration
 * sent; exactly one of each of `events` (for all calls, or per call), no other event (call.ended
 * saying COMPLETED and that duration); one
 * call_minute row of ceil(duration / 60); each session holds exactly its calls' records and its
 * callCount says so. One line per problem, grouped by kind, the first few examples each.
 */
export function callProblems(f: CallFacts, calls: readonly WalkedCall[], events: readonly string[] | ((c: WalkedCall) => readonly string[])): string[] {
  const kinds = new Map<string, string[]>()
  const add = (kind: string, example: string) => { const a = kinds.get(kind); if (a) a.push(example); else kinds.set(kind, [example]) }
  for (const c of calls) {
    const r = f.records.get(c.callId)
    if (!r) add('no call record', c.callId)
    else {
      if (r.status !== 'COMPLETED') add(`record ${r.status}, not COMPLETED`, c.callId)
      else if (r.durationSeconds !== c.durationSeconds) add('record COMPLETED with another duration', `${c.callId}: ${r.durationSeconds} s, sent ${c.durationSeconds} s`)
      if (r.sessionId !== c.sessionId) add('record on another session', c.callId)
    }
    const ev = f.events.get(c.callId) ?? new Map<string, number>()
    const eventTypes = typeof events === 'function' ? events(c) : events
    for (const type of eventTypes) {
      const n = ev.get(type) ?? 0
      if (n !== 1) add(`${n} × ${type} (want 1)`, c.callId)
    }
    for (const [type, n] of ev) if (!eventTypes.includes(type)) add(`${n} × ${type} (want none)`, c.callId)
    const ended = f.ended.get(c.callId) ?? []
    if (ended.length === 1 && (ended[0]!['status'] !== 'COMPLETED' || ended[0]!['durationSeconds'] !== c.durationSeconds)) {
      add('call.ended does not say COMPLETED with the duration sent', `${c.callId}: ${JSON.stringify({ status: ended[0]!['status'], durationSeconds: ended[0]!['durationSeconds'] })}, sent ${c.durationSeconds} s`)
    }
    const minutes = f.minutes.get(c.callId) ?? []
    const want = Math.ceil(c.durationSeconds / 60)
    if (minutes.length !== 1) add(`${minutes.length} call_minute rows (want 1)`, c.callId)
    else if (minutes[0] !== want) add('call_minute of another quantity', `${c.callId}: ${minutes[0]}, want ${want}`)
  }
  const perSession = new Map<string, number>()
  for (const c of calls) perSession.set(c.sessionId, (perSession.get(c.sessionId) ?? 0) + 1)
  for (const [id, n] of perSession) {
    const s = f.sessions.get(id)
    if (!s) { add('session missing', id); continue }
    if (s.records !== n) add('session holds another number of call records than calls were made', `${id}: ${s.records} records, ${n} calls`)
    if (s.callCount !== s.records) add('the stored callCount differs from its call records', `${id}: callCount ${s.callCount}, ${s.records} records`)
  }
  return [...kinds].map(([kind, ex]) => `${ex.length} × ${kind}: ${ex.slice(0, 4).join('; ')}${ex.length > 4 ? ' …' : ''}`)
}
