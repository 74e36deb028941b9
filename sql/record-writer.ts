// Call and SMS records are written behind the routing answer (the provider waits for TeXML, not
// for our disk): operations are queued and applied by group commit, one transaction per flush
// (one statement for the usual batch of new calls), every `flushMs` (10 ms) or `maxBatch` (200)
// operations, whichever comes first. Inserts are
// idempotent upserts keyed by the provider's ids (a replayed callback changes nothing twice);
// updates carry a status guard so a status never moves backwards.
//
// What an operation causes (its outbox events and usage, DECISIONS 6) is written in the same
// transaction, and only when the operation took effect (a new row, a guarded update that matched):
// a record change and its event commit together or not at all, and a replay emits nothing. The
// events are announced (stream, bus, dispatcher) after the commit.
//
// The returned promises never reject (callers may fire and forget without an unhandled
// rejection): a failed flush is retried once operation by operation, and what still fails is
// reported to `onError` by code and resolves as null/false.
import { sql, type CommonQueryMethods, type DatabasePool, type FragmentSqlToken } from 'slonik'
import type { EventEnvelope } from '../api/event-envelope.js'
import type { CallDirection, CallStatus, SmsStatus } from '../engine/types.js'
import { finishUsage, usageCtes, usageOutcome, usageRows, type UsageInput, type UsageOutcome } from './billing.js'
import { isUuid } from './cursor.js'
import { errorCode, guard, toStoreError } from './errors.js'
import { insertOutbox, outboxInsert, outboxInsertFrom } from './outbox.js'
import { PREPARE } from './prepared.js'
import { iso, isoOrNull, jsonb, transact, tsOrNull } from './transaction.js'

export interface CallInsert {
  id: string
  sessionId: string
  tenantId: string
  providerCallId: string
  status: CallStatus
  direction: CallDirection
  initiatedAt: number
  /** The party B hash in force when the call was routed (spec 2.2). */
  partyBHash: string
  durationSeconds?: number
  answeredAt?: number | null
  endedAt?: number | null
  recordingConsentPlayed?: boolean
}

export interface CallPatch {
  status?: CallStatus
  durationSeconds?: number
  answeredAt?: number | null
  endedAt?: number | null
  recordingUrl?: string | null
  recordingDurationSeconds?: number | null
  recordingConsentPlayed?: boolean
}

export type CallKey = { callId: string } | { providerCallId: string }

export interface SmsInsert {
  id: string
  sessionId: string
  tenantId: string
  /** The inbound message id: the idempotency key. */
  providerMessageId: string
  /** The id of the forwarded message at the provider, when known. */
  forwardMessageId?: string | null
  direction: CallDirection
  status: SmsStatus
  sentAt: number
  deliveredAt?: number | null
}

/** What an operation causes when it takes effect, written in its transaction. */
export interface Effects {
  events?: EventEnvelope[]
  usage?: UsageInput[]
}

export interface RecordWriter {
  /**
   * Resolves with the id stored for this provider call id (an earlier one on replay), null on
   * failure. `events` are written with a new row only.
   */
  upsertCall(row: CallInsert, events?: EventEnvelope[]): Promise<string | null>
  /** Resolves true when a row matched (and, with `fromStatuses`, was in one of those statuses). */
  updateCall(key: CallKey, patch: CallPatch, fromStatuses?: readonly CallStatus[], effects?: Effects): Promise<boolean>
  upsertSms(row: SmsInsert, effects?: Effects): Promise<string | null>
  /** The outcome of forwarding the QUEUED message `id`; true when it was still QUEUED. */
  markSmsForwarded(id: string, forwardMessageId: string | null, status: SmsStatus, at: number, effects?: Effects): Promise<boolean>
  /** QUEUED < SENT < DELIVERED | FAILED: a status only moves forward. */
  updateSmsStatusByForwardId(forwardMessageId: string, status: SmsStatus, deliveredAt?: number | null): Promise<boolean>
  /** Applies everything queued so far. */
  flush(): Promise<void>
  /** Flushes and refuses further operations. */
  close(): Promise<void>
}

type Op = (
  | { kind: 'call'; row: CallInsert; done: (id: string | null) => void }
  | { kind: 'call-update'; key: CallKey; patch: CallPatch; from: readonly CallStatus[] | undefined; done: (ok: boolean) => void }
  | { kind: 'sms'; row: SmsInsert; done: (id: string | null) => void }
  | { kind: 'sms-forward'; id: string; forwardId: string | null; status: SmsStatus; at: number; done: (ok: boolean) => void }
  | { kind: 'sms-status'; forwardId: string; status: SmsStatus; deliveredAt: number | null; done: (ok: boolean) => void }
) & { effects?: Effects | undefined }

type Result = string | boolean | null

interface Applied {
  results: Map<Op, Result>
  /** The events written, in the order of their operations. */
  events: EventEnvelope[]
}

const SMS_RANK: Readonly<Record<SmsStatus, number>> = { QUEUED: 0, SENT: 1, DELIVERED: 2, FAILED: 2 }

const failedResult = (op: Op): Result => (op.kind === 'call' || op.kind === 'sms' ? null : false)

/** Took effect: a new row (its own id came back), or an update that matched. */
function tookEffect(op: Op, r: Result | undefined): boolean {
  return op.kind === 'call' || op.kind === 'sms' ? r === op.row.id : r === true
}

export function createRecordWriter(pool: DatabasePool, opts: {
  flushMs?: number
  maxBatch?: number
  onError?: (code: string) => void
  /** After commit: the events just written (stream, other nodes, webhook dispatcher). */
  announce?: (events: EventEnvelope[]) => void
} = {}): RecordWriter {
  const flushMs = opts.flushMs ?? 10
  const maxBatch = opts.maxBatch ?? 200
  const onError = opts.onError ?? (() => {})
  const announce = opts.announce ?? (() => {})
  let pending: Op[] = []
  let timer: NodeJS.Timeout | null = null
  let running: Promise<void> = Promise.resolve()
  let closed = false

  function enqueue<T extends Result>(make: (done: (v: T) => void) => Op, failed: T): Promise<T> {
    if (closed) {
      onError('writer-closed')
      return Promise.resolve(failed)
    }
    return new Promise<T>(resolve => {
      pending.push(make(resolve))
      if (pending.length >= maxBatch) void flush()
      else timer ??= setTimeout(() => void flush(), flushMs)
    })
  }

  function flush(): Promise<void> {
    if (timer) clearTimeout(timer)
    timer = null
    const ops = pending
    pending = []
    if (ops.length > 0) running = running.then(() => apply(ops))
    return running
  }

  async function apply(ops: Op[]): Promise<void> {
    const results = new Map<Op, Result>()
    const events: EventEnvelope[] = []
    // The usual batch (new calls and their events only) is one statement: atomic without
    // BEGIN/COMMIT, which would be two more round trips on every flush.
    const run = async (unit: Op[]) => {
      const out = unit.every(op => op.kind === 'call')
        ? await guard(() => applyOps(pool, unit))
        : await transact(pool, tx => applyOps(tx, unit))
      for (const [op, r] of out.results) results.set(op, r)
      for (const e of out.events) events.push(e)
    }
    try {
      await run(ops)
    } catch (err) {
      const e = toStoreError(err)
      onError(e.code)
      // The retry. A lost connection: the batch once more. A refused row (unknown session, bad
      // value): one operation at a time, so it does not sink the others.
      const units = e.slug === 'unavailable' || e.slug === 'retryable' ? [ops] : ops.map(op => [op])
      for (const unit of units) {
        try {
          await run(unit)
        } catch (again) {
          onError(errorCode(again))
        }
      }
    }
    if (events.length > 0) announce(events)
    for (const op of ops) (op.done as (v: Result) => void)(results.has(op) ? results.get(op)! : failedResult(op))
  }

  return {
    upsertCall: (row, events) => enqueue<string | null>(done => ({ kind: 'call', row, done, effects: events && { events } }), null),
    updateCall: (key, patch, fromStatuses, effects) =>
      enqueue<boolean>(done => ({ kind: 'call-update', key, patch, from: fromStatuses, done, effects }), false),
    upsertSms: (row, effects) => enqueue<string | null>(done => ({ kind: 'sms', row, done, effects }), null),
    markSmsForwarded: (id, forwardId, status, at, effects) =>
      enqueue<boolean>(done => ({ kind: 'sms-forward', id, forwardId, status, at, done, effects }), false),
    updateSmsStatusByForwardId: (forwardId, status, deliveredAt = null) =>
      enqueue<boolean>(done => ({ kind: 'sms-status', forwardId, status, deliveredAt, done }), false),
    flush,
    async close() {
      // Drain first: operations queued while a flush runs (e.g. by the callers it resolves) must
      // still be written, not refused as 'writer-closed'.
      await flush()
      while (pending.length > 0) await flush()
      closed = true
    },
  }
}

/**
 * Applies a batch in order of kind (inserts first, so updates queued after them find the rows),
 * then writes the effects of the operations that took effect. A batch of new calls only is one
 * statement, its events riding in it; any other batch runs inside a transaction.
 */
async function applyOps(tx: CommonQueryMethods, ops: readonly Op[]): Promise<Applied> {
  const results = new Map<Op, Result>()
  const of = <K extends Op['kind']>(kind: K) => ops.filter((o): o is Extract<Op, { kind: K }> => o.kind === kind)

  const calls = of('call')
  if (calls.length > 0) {
    const rows = calls.map(({ row: r }) => ({
      id: r.id, session_id: r.sessionId, tenant_id: r.tenantId, provider_call_id: r.providerCallId, status: r.status,
      direction: r.direction, duration_seconds: r.durationSeconds ?? 0, initiated_at: iso(r.initiatedAt),
      answered_at: isoOrNull(r.answeredAt ?? null), ended_at: isoOrNull(r.endedAt ?? null),
      recording_consent_played: r.recordingConsentPlayed ?? false, party_b_hash: r.partyBHash,
    }))
    // The events of each call, keyed by its id: only those of rows this statement inserted are
    // written (a replayed CallSid inserts nothing, so it emits nothing).
    const events = calls.flatMap(c => (c.effects?.events ?? []).map(env => ({ call_id: c.row.id, env })))
    // spec 2.2 callCount/lastCallAt move in the same statement as the call records they count,
    // so a crash can never leave one without the other; a replayed call (no new row) counts nothing.
    const ids = await storedIds(tx, 'call_records', 'provider_call_id', calls.map(c => c.row.providerCallId), sql.fragment`${PREPARE}
      WITH ins AS (
        INSERT INTO call_records (id, session_id, tenant_id, provider_call_id, status, direction, duration_seconds,
                                  initiated_at, answered_at, ended_at, recording_consent_played, party_b_hash)
        SELECT * FROM jsonb_to_recordset(${jsonb(rows)}) AS r(
          id uuid, session_id uuid, tenant_id uuid, provider_call_id text, status text, direction text, duration_seconds int,
          initiated_at timestamptz, answered_at timestamptz, ended_at timestamptz, recording_consent_played boolean, party_b_hash text)
        ON CONFLICT (provider_call_id) DO NOTHING
        RETURNING provider_call_id, id, session_id, initiated_at),
      counted AS (
        UPDATE sessions s SET call_count = s.call_count + c.n, last_call_at = GREATEST(s.last_call_at, c.at)
        FROM (SELECT session_id, count(*)::int AS n, max(initiated_at) AS at FROM ins GROUP BY session_id) c
        WHERE s.id = c.session_id)
      ${events.length > 0 ? sql.fragment`, outbox_ins AS (${outboxInsertFrom(sql.fragment`
        SELECT e.env AS x FROM jsonb_to_recordset(${jsonb(events)}) AS e(call_id uuid, env jsonb)
        WHERE e.call_id IN (SELECT id FROM ins)`)})` : sql.fragment``}
      SELECT provider_call_id AS key, id FROM ins`)
    for (const c of calls) results.set(c, ids.get(c.row.providerCallId) ?? null)
  }

  const smss = of('sms')
  if (smss.length > 0) {
    const rows = smss.map(({ row: r }) => ({
      id: r.id, session_id: r.sessionId, tenant_id: r.tenantId, provider_message_id: r.providerMessageId,
      forward_message_id: r.forwardMessageId ?? null, direction: r.direction, status: r.status, sent_at: iso(r.sentAt),
      delivered_at: isoOrNull(r.deliveredAt ?? null),
    }))
    const ids = await storedIds(tx, 'sms_records', 'provider_message_id', smss.map(s => s.row.providerMessageId), sql.fragment`
      INSERT INTO sms_records (id, session_id, tenant_id, provider_message_id, forward_message_id, direction, status, sent_at, delivered_at)
      SELECT * FROM jsonb_to_recordset(${jsonb(rows)}) AS r(
        id uuid, session_id uuid, tenant_id uuid, provider_message_id text, forward_message_id text, direction text, status text,
        sent_at timestamptz, delivered_at timestamptz)
      ON CONFLICT DO NOTHING
      RETURNING provider_message_id AS key, id`)
    for (const s of smss) results.set(s, ids.get(s.row.providerMessageId) ?? null)
  }

  // Forward outcomes in one statement: under an SMS flood a statement each (a round trip each, in
  // a writer that applies one batch at a time) capped forwarding near 360 messages/s in the bench.
  // Each message is forwarded once, so no two rows of a batch name the same message.
  const forwards = of('sms-forward')
  if (forwards.length > 0) {
    const rows = forwards.map(f => ({ id: f.id, forward_id: f.forwardId, status: f.status, at: iso(f.at) }))
    const hit = new Set(await tx.anyFirst(sql.unsafe`
      UPDATE sms_records s SET forward_message_id = COALESCE(u.forward_id, s.forward_message_id), status = u.status,
        delivered_at = CASE WHEN u.status = 'DELIVERED' THEN u.at ELSE s.delivered_at END
      FROM jsonb_to_recordset(${jsonb(rows)}) AS u(id uuid, forward_id text, status text, at timestamptz)
      WHERE s.id = u.id AND s.status = 'QUEUED'
      RETURNING s.id`) as readonly string[])
    for (const f of forwards) results.set(f, hit.has(f.id))
  }

  for (const op of ops) {
    if (op.kind === 'call-update') results.set(op, await updateCallRow(tx, op.key, op.patch, op.from))
    else if (op.kind === 'sms-status') {
      const hit = await tx.maybeOneFirst(sql.unsafe`
        UPDATE sms_records SET status = ${op.status}, delivered_at = COALESCE(${tsOrNull(op.deliveredAt)}, delivered_at)
        WHERE forward_message_id = ${op.forwardId}
          AND (CASE status WHEN 'QUEUED' THEN 0 WHEN 'SENT' THEN 1 ELSE 2 END) < ${SMS_RANK[op.status]}
        RETURNING 1`)
      results.set(op, hit !== null)
    }
  }

  const events: EventEnvelope[] = []
  const written: EventEnvelope[] = []
  const usage: UsageInput[] = []
  for (const op of ops) {
    if (!op.effects || !tookEffect(op, results.get(op))) continue
    for (const e of op.effects.events ?? []) events.push(e)
    if (op.kind === 'call') continue // its events rode in the insert statement
    for (const e of op.effects.events ?? []) written.push(e)
    for (const u of op.effects.usage ?? []) usage.push(u)
  }
  await writeEventsAndUsage(tx, written, usage)
  return { results, events }
}

/**
 * Events and their usage in one statement; only the first usage of a tenant in a month (its
 * period does not exist yet) takes more statements to open the period and add those rows.
 */
async function writeEventsAndUsage(tx: CommonQueryMethods, envelopes: readonly EventEnvelope[], usage: readonly UsageInput[]): Promise<void> {
  if (usage.length === 0) return insertOutbox(tx, envelopes)
  const rows = usageRows(usage)
  const out = (await tx.one(sql.unsafe`
    WITH ${envelopes.length > 0 ? sql.fragment`outbox_ins AS (${outboxInsert(envelopes)}),` : sql.fragment``}
    ${usageCtes(rows)}
    SELECT ${usageOutcome}`)) as unknown as UsageOutcome
  await finishUsage(tx, usage, rows, out)
}

/** Runs an upsert returning (key, id) for new rows, then reads the ids of the keys that existed. */
async function storedIds(tx: CommonQueryMethods, table: 'call_records' | 'sms_records', keyColumn: 'provider_call_id' | 'provider_message_id', keys: string[], upsert: FragmentSqlToken): Promise<Map<string, string>> {
  const ids = new Map<string, string>()
  for (const r of (await tx.any(sql.unsafe`${upsert}`)) as readonly { key: string; id: string }[]) ids.set(r.key, r.id)
  const missing = keys.filter(k => !ids.has(k))
  if (missing.length > 0) {
    const rows = (await tx.any(sql.unsafe`
      SELECT ${sql.identifier([keyColumn])} AS key, id FROM ${sql.identifier([table])}
      WHERE ${sql.identifier([keyColumn])} = ANY(${sql.array(missing, 'text')})`)) as readonly { key: string; id: string }[]
    for (const r of rows) ids.set(r.key, r.id)
  }
  return ids
}

async function updateCallRow(tx: CommonQueryMethods, key: CallKey, patch: CallPatch, from: readonly CallStatus[] | undefined): Promise<boolean> {
  const sets: FragmentSqlToken[] = []
  if (patch.status !== undefined) sets.push(sql.fragment`status = ${patch.status}`)
  if (patch.durationSeconds !== undefined) sets.push(sql.fragment`duration_seconds = ${patch.durationSeconds}`)
  if (patch.answeredAt !== undefined) sets.push(sql.fragment`answered_at = ${tsOrNull(patch.answeredAt)}`)
  if (patch.endedAt !== undefined) sets.push(sql.fragment`ended_at = ${tsOrNull(patch.endedAt)}`)
  if (patch.recordingUrl !== undefined) sets.push(sql.fragment`recording_url = ${patch.recordingUrl}`)
  if (patch.recordingDurationSeconds !== undefined) sets.push(sql.fragment`recording_duration_seconds = ${patch.recordingDurationSeconds}`)
  if (patch.recordingConsentPlayed !== undefined) sets.push(sql.fragment`recording_consent_played = ${patch.recordingConsentPlayed}`)
  if (sets.length === 0 || ('callId' in key && !isUuid(key.callId))) return false
  const where = 'callId' in key ? sql.fragment`id = ${key.callId}` : sql.fragment`provider_call_id = ${key.providerCallId}`
  const hit = await tx.maybeOneFirst(sql.unsafe`
    UPDATE call_records SET ${sql.join(sets, sql.fragment`, `)}
    WHERE ${where} ${from ? sql.fragment`AND status = ANY(${sql.array([...from], 'text')})` : sql.fragment``}
    RETURNING 1`)
  return hit !== null
}
