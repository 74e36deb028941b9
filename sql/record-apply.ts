// One batch of record operations applied in Postgres (the write-behind queue around it is
// sql/record-writer.ts). Operations are plain data (sql/record-ops.ts), so a batch can be journaled and replayed:
// every one is idempotent (inserts keyed by the provider's ids, updates guarded by the status they
// were computed from), so applying a batch twice changes nothing twice.
//
// A call's later callbacks (status, dial-status, recording) are applied here, not in the request:
// the handler answers the provider from memory and queues what it was told; the transition
// (engine/call-status.ts) is computed against the call's state in the writer's cache, read from
// Postgres only for a call this node has not seen. What an operation causes (outbox events,
// usage; contract D6) is written in the same transaction, and only when it took effect.
import { sql } from 'slonik'
import { callEnvelope, type EventEnvelope } from './vocabulary/event-envelope.js'
import { applyCallStatus, billableMinutes } from '../engine/call-status.js'
import type { CallDirection, CallStatus, SmsStatus } from '../engine/types.js'
import { finishUsage, usageCtes, usageOutcome, usageRows, type UsageInput, type UsageOutcome } from './billing.js'
import { isUuid } from './cursor.js'
import { insertOutbox, outboxInsert, outboxInsertFrom } from './outbox.js'
import { PREPARE, type Queries } from './direct.js'
import { arrayLiteral, iso, isoOrNull, jsonb } from './transaction.js'
import {
  CALL_START, callStartEvents, envelopeJson, failedResult,
  type CallCache, type CallCallback, type CallInsert, type CallKey, type CallState, type OpData, type Result, type SmsClaim,
} from './record-ops.js'

/** What applying a batch did: a result per operation (by index) and the events it wrote. */
export interface Applied {
  results: Result[]
  events: EventEnvelope[]
  /** Call states as committed by this batch, for the writer's cache once the batch commits. */
  calls: CallState[]
}

const SMS_RANK: Readonly<Record<SmsStatus, number>> = { QUEUED: 0, SENT: 1, DELIVERED: 2, FAILED: 2 }

/** Took effect: a new row (its own id came back), or an update that matched. */
function tookEffect(op: OpData, r: Result | undefined): boolean {
  if (op.kind === 'sms') return r !== null && typeof r === 'object' && r.id === op.row.id
  return r === true
}

/**
 * Applies a batch in order of kind (inserts first, so what follows them finds the rows), then
 * writes the effects of the operations that took effect. A batch of new calls only is one
 * statement, its events riding in it (atomic without BEGIN/COMMIT); any other batch must run
 * inside a transaction.
 */
export async function applyOps(tx: Queries, ops: readonly OpData[], cache: CallCache): Promise<Applied> {
  const results: Result[] = ops.map(failedResult)
  const indexed = <K extends OpData['kind']>(kind: K) =>
    ops.flatMap((o, i) => (o.kind === kind ? [{ op: o as Extract<OpData, { kind: K }>, i }] : []))
  const calls: CallState[] = []
  /** The new calls' events, which ride in their insert statement. */
  const inserted: EventEnvelope[] = []
  /** Events written by the statement of their change; then those written at the end. */
  const rode: EventEnvelope[] = []
  const written: EventEnvelope[] = []
  const usage: UsageInput[] = []

  const newCalls = indexed('call')
  if (newCalls.length > 0) {
    const rows = newCalls.map(({ op }) => op.events === CALL_START
      ? { row: op.row, events: callStartEvents(op.row), made: true }
      : { row: op.row, events: op.events ?? [] })
    const ids = await insertCalls(tx, rows)
    newCalls.forEach((c, k) => {
      const id = ids.get(c.op.row.providerCallId) ?? null
      results[c.i] = id
      if (id !== c.op.row.id) return
      calls.push(stateOf(c.op.row))
      inserted.push(...rows[k]!.events)
    })
  }

  const callEvents = indexed('call-event')
  if (callEvents.length > 0) {
    const out = await applyCallEvents(tx, callEvents.map(c => c.op.cb), cache, calls)
    callEvents.forEach((c, k) => { results[c.i] = out.results[k]! })
    rode.push(...out.rebuilt)
    written.push(...out.events)
    usage.push(...out.usage)
  }

  const smss = indexed('sms')
  if (smss.length > 0) {
    const rows = smss.map(({ op: { row: r } }) => ({
      id: r.id, session_id: r.sessionId, tenant_id: r.tenantId, provider_message_id: r.providerMessageId,
      forward_message_id: r.forwardMessageId ?? null, direction: r.direction, status: r.status, sent_at: iso(r.sentAt),
      delivered_at: isoOrNull(r.deliveredAt ?? null), reason: r.reason ?? null,
    }))
    const stored = new Map<string, SmsClaim>()
    const keys = smss.map(s => s.op.row.providerMessageId)
    for (const r of (await tx.any(sql.unsafe`
      INSERT INTO sms_records (id, session_id, tenant_id, provider_message_id, forward_message_id, direction, status, sent_at, delivered_at, reason)
      SELECT r.* FROM jsonb_to_recordset(${jsonb(rows)}) AS r(
        id uuid, session_id uuid, tenant_id uuid, provider_message_id text, forward_message_id text, direction text, status text,
        sent_at timestamptz, delivered_at timestamptz, reason text)
      ON CONFLICT DO NOTHING
      RETURNING provider_message_id AS key, id, status`)) as readonly { key: string; id: string; status: SmsStatus }[]) {
      stored.set(r.key, { id: r.id, status: r.status })
    }
    const missing = keys.filter(k => !stored.has(k))
    if (missing.length > 0) {
      for (const r of (await tx.any(sql.unsafe`
        SELECT provider_message_id AS key, id, status FROM sms_records WHERE provider_message_id = ANY(${sql.array(missing, 'text')})`,
      )) as readonly { key: string; id: string; status: SmsStatus }[]) stored.set(r.key, { id: r.id, status: r.status })
    }
    for (const s of smss) results[s.i] = stored.get(s.op.row.providerMessageId) ?? null
  }

  // Forward outcomes in one statement: under an SMS flood a statement each capped forwarding near
  // 360 messages/s in the bench. Each message is forwarded once, so no two rows name one message.
  const forwards = indexed('sms-forward')
  if (forwards.length > 0) {
    const rows = forwards.map(({ op: f }) => ({ id: f.id, forward_id: f.forwardId, status: f.status, at: iso(f.at) }))
    const hit = new Set(await tx.anyFirst(sql.unsafe`
      UPDATE sms_records s SET forward_message_id = COALESCE(u.forward_id, s.forward_message_id), status = u.status,
        delivered_at = CASE WHEN u.status = 'DELIVERED' THEN u.at ELSE s.delivered_at END
      FROM jsonb_to_recordset(${jsonb(rows)}) AS u(id uuid, forward_id text, status text, at timestamptz)
      WHERE s.id = u.id AND s.status = 'QUEUED'
      RETURNING s.id`) as readonly string[])
    for (const f of forwards) results[f.i] = hit.has(f.op.id)
  }

  for (const { op, i } of indexed('sms-status')) {
    const hit = await tx.maybeOneFirst(sql.unsafe`
      UPDATE sms_records SET status = ${op.status},
        delivered_at = COALESCE(${op.deliveredAt === null ? null : iso(op.deliveredAt)}::timestamptz, delivered_at)
      WHERE forward_message_id = ${op.forwardId}
        AND (CASE status WHEN 'QUEUED' THEN 0 WHEN 'SENT' THEN 1 ELSE 2 END) < ${SMS_RANK[op.status]}
      RETURNING 1`)
    results[i] = hit !== null
  }

  ops.forEach((op, i) => {
    if ((op.kind !== 'sms' && op.kind !== 'sms-forward') || !op.effects || !tookEffect(op, results[i])) return
    written.push(...(op.effects.events ?? []))
    usage.push(...(op.effects.usage ?? []))
  })
  await writeEventsAndUsage(tx, written, usage)
  // In the order they were written: new calls (and rebuilt ones), then callbacks, then SMS.
  return { results, events: [...inserted, ...rode, ...written], calls }
}

function stateOf(r: CallInsert): CallState {
  return {
    id: r.id, providerCallId: r.providerCallId, sessionId: r.sessionId, tenantId: r.tenantId, proxy: r.proxy ?? '',
    direction: r.direction, status: r.status, answered: r.answeredAt != null, hasRecordingUrl: false,
  }
}

/** A new call and its events; `made`: the events were made at apply (CALL_START), never journaled. */
interface NewCall { row: CallInsert; events: readonly EventEnvelope[]; made?: boolean }

/**
 * New call records with their events in one statement; returns provider call id → stored id (the
 * new row's, or the existing one's on a replayed CallSid). contract 2.2 callCount/lastCallAt are
 * counted from these rows (sql/call-count.ts): the sessions' rows are not touched.
 */
async function insertCalls(tx: Queries, calls: ReadonlyArray<NewCall>): Promise<Map<string, string>> {
  // One array per column (sql/transaction.ts arrayLiteral): unnest costs Postgres less than
  // jsonb_to_recordset of the same rows.
  const col = <T extends string | number | boolean | null>(f: (r: CallInsert) => T) => arrayLiteral(calls.map(c => f(c.row)))
  // Only the events of rows this statement inserted are written (a replay inserts nothing).
  // The text of jsonb([{ call_id, env }]), each envelope's text shared with the journal line;
  // events made here (`made`) have no line, and a WeakMap entry per event cost ~0.8 µs.
  let events = ''
  for (const c of calls) {
    for (const env of c.events) {
      events += `${events === '' ? '[' : ','}{"call_id":${JSON.stringify(c.row.id)},"env":${c.made ? JSON.stringify(env) : envelopeJson(env)}}`
    }
  }
  const ids = new Map<string, string>()
  for (const r of (await tx.any(sql.unsafe`${PREPARE}
    WITH ins AS (
      INSERT INTO call_records (id, session_id, tenant_id, provider_call_id, status, direction, duration_seconds,
                                initiated_at, answered_at, ended_at, recording_consent_played, party_b_hash)
      SELECT * FROM unnest(${col(r => r.id)}::uuid[], ${col(r => r.sessionId)}::uuid[], ${col(r => r.tenantId)}::uuid[],
        ${col(r => r.providerCallId)}::text[], ${col(r => r.status)}::text[], ${col(r => r.direction)}::text[],
        ${col(r => r.durationSeconds ?? 0)}::int[], ${col(r => iso(r.initiatedAt))}::timestamptz[],
        ${col(r => isoOrNull(r.answeredAt ?? null))}::timestamptz[], ${col(r => isoOrNull(r.endedAt ?? null))}::timestamptz[],
        ${col(r => r.recordingConsentPlayed ?? false)}::boolean[], ${col(r => r.partyBHash)}::text[])
      ON CONFLICT (provider_call_id) DO NOTHING
      RETURNING provider_call_id, id, session_id)
    ${events !== '' ? sql.fragment`, outbox_ins AS (${outboxInsertFrom(sql.fragment`
      SELECT e.env AS x, ins.session_id FROM jsonb_to_recordset(${events + ']'}::jsonb) AS e(call_id uuid, env jsonb)
      JOIN ins ON ins.id = e.call_id`, { column: 'session_id' }, { fresh: true })})` : sql.fragment``}
    SELECT provider_call_id AS key, id FROM ins`)) as readonly { key: string; id: string }[]) ids.set(r.key, r.id)
  const missing = calls.map(c => c.row.providerCallId).filter(k => !ids.has(k))
  if (missing.length > 0) {
    for (const r of (await tx.any(sql.unsafe`
      SELECT provider_call_id AS key, id FROM call_records WHERE provider_call_id = ANY(${sql.array(missing, 'text')})`,
    )) as readonly { key: string; id: string }[]) ids.set(r.key, r.id)
  }
  return ids
}

interface Working extends CallState {
  /** The status Postgres holds (the guard of the update). */
  from: CallStatus
  patch: { status?: CallStatus; answeredAt?: string; endedAt?: string; durationSeconds?: number; recordingUrl?: string; recordingDurationSeconds?: number }
  events: EventEnvelope[]
  usage: UsageInput[]
}

/** A call another writer moved between our read and our update is read again, at most this often. */
const MAX_ROUNDS = 3

/**
 * Callbacks applied against each call's state: the cache (what this node committed), then this
 * batch's new calls, then Postgres; a call found nowhere is created from the callback's rebuild.
 * Every changed call is one row of one guarded UPDATE; a row that another node changed meanwhile
 * (status no longer the one read) is read again and its callbacks recomputed.
 */
async function applyCallEvents(tx: Queries, cbs: readonly CallCallback[], cache: CallCache, batchCalls: CallState[]): Promise<{ results: boolean[]; events: EventEnvelope[]; usage: UsageInput[]; rebuilt: EventEnvelope[] }> {
  const results = cbs.map(() => false)
  const events: EventEnvelope[] = []
  const rebuiltEvents: EventEnvelope[] = []
  const usage: UsageInput[] = []
  const fresh = new Map<string, CallState>() // read from Postgres or created in this batch
  for (const c of batchCalls) fresh.set(c.id, c)
  const find = (key: CallKey): CallState | undefined => {
    if ('callId' in key) return fresh.get(key.callId) ?? cache.get(key.callId)
    for (const c of fresh.values()) if (c.providerCallId === key.providerCallId) return c
    return cache.bySid(key.providerCallId)
  }
  let todo = cbs.map((_, i) => i)
  for (let round = 0; round < MAX_ROUNDS && todo.length > 0; round++) {
    const unknown = todo.filter(i => round > 0 || !find(cbs[i]!.key))
    if (unknown.length > 0) {
      for (const s of await readCalls(tx, unknown.map(i => cbs[i]!.key))) fresh.set(s.id, s)
      const rebuilt = unknown.filter(i => !find(cbs[i]!.key) && cbs[i]!.rebuild)
      if (rebuilt.length > 0) rebuiltEvents.push(...await rebuildCalls(tx, rebuilt.map(i => cbs[i]!.rebuild!), fresh))
    }
    const work = new Map<string, Working>()
    const touched = new Map<number, string>()
    for (const i of todo) {
      const base = find(cbs[i]!.key)
      if (!base) continue // nothing known and nothing to rebuild from: answered, changes nothing
      let w = work.get(base.id)
      if (!w) work.set(base.id, w = { ...base, from: base.status, patch: {}, events: [], usage: [] })
      results[i] = applyCallback(w, cbs[i]!)
      touched.set(i, base.id)
    }
    const dirty = [...work.values()].filter(w => Object.keys(w.patch).length > 0)
    const matched = dirty.length > 0 ? await updateCalls(tx, dirty) : new Set<string>()
    const retry: number[] = []
    for (const w of dirty) {
      if (matched.has(w.id)) {
        events.push(...w.events)
        usage.push(...w.usage)
        batchCalls.push(stateOfWorking(w))
      } else {
        fresh.delete(w.id) // read it again: its state in the cache is stale
      }
    }
    for (const [i, id] of touched) {
      const w = work.get(id)!
      if (Object.keys(w.patch).length > 0 && !matched.has(id)) { results[i] = false; retry.push(i) }
    }
    todo = retry
  }
  return { results, events, usage, rebuilt: rebuiltEvents }
}

function stateOfWorking(w: Working): CallState {
  return {
    id: w.id, providerCallId: w.providerCallId, sessionId: w.sessionId, tenantId: w.tenantId, proxy: w.proxy,
    direction: w.direction, status: w.status, answered: w.answered, hasRecordingUrl: w.hasRecordingUrl,
  }
}

/** contract D5: one callback's change to the call's working state; true when it changed it. */
function applyCallback(w: Working, cb: CallCallback): boolean {
  const at = iso(cb.at)
  if (cb.source === 'recording') {
    const seconds = cb.duration ?? 0
    w.patch.recordingDurationSeconds = seconds
    if (cb.recordingUrl) { w.patch.recordingUrl = cb.recordingUrl; w.hasRecordingUrl = true }
    if ((cb.value || 'completed') === 'completed' && seconds > 0 && cb.recordingSid) {
      w.usage.push({ tenantId: w.tenantId, metric: 'recording_minute', quantity: billableMinutes(seconds), at: cb.at, sessionId: w.sessionId, callRecordId: w.id, dedupeKey: `recording_minute:${cb.recordingSid}` })
    }
    return true
  }
  let changed = false
  if (cb.source === 'dial-status' && cb.recordingUrl && !w.hasRecordingUrl) {
    w.patch.recordingUrl = cb.recordingUrl
    w.hasRecordingUrl = true
    changed = true
  }
  const change = applyCallStatus(w.status, {
    source: cb.source, callStatus: cb.value, ...(cb.duration !== undefined ? { duration: cb.duration } : {}), answeredSeen: w.answered,
  })
  if (!change) return changed
  w.status = w.patch.status = change.status
  if (change.status === 'ANSWERED') { w.answered = true; w.patch.answeredAt = at }
  const terminal = change.status === 'COMPLETED' || change.status === 'MISSED' || change.status === 'FAILED'
  const duration = change.durationSeconds ?? 0
  if (terminal) { w.patch.endedAt = at; w.patch.durationSeconds = duration }
  if (change.event) {
    w.events.push(callEnvelope(change.event, cb.at, {
      sessionId: w.sessionId, tenantId: w.tenantId, proxyNumber: w.proxy, callId: w.id, direction: w.direction,
      status: change.status, durationSeconds: duration,
    }))
  }
  if (change.status === 'COMPLETED' && duration > 0) {
    w.usage.push({ tenantId: w.tenantId, metric: 'call_minute', quantity: billableMinutes(duration), at: cb.at, sessionId: w.sessionId, callRecordId: w.id, dedupeKey: `call_minute:${w.id}` })
  }
  return true
}

async function readCalls(tx: Queries, keys: readonly CallKey[]): Promise<CallState[]> {
  const ids = keys.flatMap(k => ('callId' in k && isUuid(k.callId) ? [k.callId] : []))
  const sids = keys.flatMap(k => ('providerCallId' in k ? [k.providerCallId] : []))
  if (ids.length === 0 && sids.length === 0) return []
  const rows = (await tx.any(sql.unsafe`
    SELECT c.id, c.provider_call_id, c.session_id, c.tenant_id, c.status, c.direction,
           c.answered_at IS NOT NULL AS answered, c.recording_url IS NOT NULL AS has_url, s.proxy_number
    FROM call_records c LEFT JOIN sessions s ON s.id = c.session_id
    WHERE c.id = ANY(${sql.array(ids, 'uuid')}) OR c.provider_call_id = ANY(${sql.array(sids, 'text')})`)) as readonly {
    id: string; provider_call_id: string; session_id: string; tenant_id: string; status: CallStatus; direction: CallDirection
    answered: boolean; has_url: boolean; proxy_number: string | null
  }[]
  return rows.map(r => ({
    id: r.id, providerCallId: r.provider_call_id, sessionId: r.session_id, tenantId: r.tenant_id, proxy: r.proxy_number ?? '',
    direction: r.direction, status: r.status, answered: r.answered, hasRecordingUrl: r.has_url,
  }))
}

/** Records lost in a crash window, created as the voice fetch would have, with their
 * call.incoming; returns the events of the rows it created. */
async function rebuildCalls(tx: Queries, rows: readonly CallInsert[], into: Map<string, CallState>): Promise<EventEnvelope[]> {
  const unique = [...new Map(rows.map(r => [r.providerCallId, r])).values()].map(row => ({ row, events: callStartEvents(row), made: true }))
  const ids = await insertCalls(tx, unique)
  const inserted = unique.filter(c => ids.get(c.row.providerCallId) === c.row.id)
  for (const c of inserted) into.set(c.row.id, stateOf(c.row))
  // A record that appeared meanwhile (another node): read it.
  const raced = unique.filter(c => ids.has(c.row.providerCallId) && ids.get(c.row.providerCallId) !== c.row.id)
  if (raced.length > 0) for (const s of await readCalls(tx, raced.map(c => ({ providerCallId: c.row.providerCallId })))) into.set(s.id, s)
  return inserted.flatMap(c => c.events)
}

async function updateCalls(tx: Queries, dirty: readonly Working[]): Promise<Set<string>> {
  const rows = dirty.map(w => ({
    id: w.id, from_status: w.from, status: w.patch.status ?? null, answered_at: w.patch.answeredAt ?? null, ended_at: w.patch.endedAt ?? null,
    duration_seconds: w.patch.durationSeconds ?? null, recording_url: w.patch.recordingUrl ?? null,
    recording_duration_seconds: w.patch.recordingDurationSeconds ?? null,
  }))
  return new Set(await tx.anyFirst(sql.unsafe`
    UPDATE call_records c SET status = COALESCE(u.status, c.status), answered_at = COALESCE(u.answered_at, c.answered_at),
      ended_at = COALESCE(u.ended_at, c.ended_at), duration_seconds = COALESCE(u.duration_seconds, c.duration_seconds),
      recording_url = COALESCE(u.recording_url, c.recording_url),
      recording_duration_seconds = COALESCE(u.recording_duration_seconds, c.recording_duration_seconds)
    FROM jsonb_to_recordset(${jsonb(rows)}) AS u(id uuid, from_status text, status text, answered_at timestamptz,
      ended_at timestamptz, duration_seconds int, recording_url text, recording_duration_seconds int)
    WHERE c.id = u.id AND c.status = u.from_status
    RETURNING c.id`) as readonly string[])
}

/**
 * Events and their usage in one statement; only the first usage of a tenant in a month (its
 * period does not exist yet) takes more statements to open the period and add those rows.
 */
async function writeEventsAndUsage(tx: Queries, envelopes: readonly EventEnvelope[], usage: readonly UsageInput[]): Promise<void> {
  if (usage.length === 0) return insertOutbox(tx, envelopes)
  const rows = usageRows(usage)
  const out = (await tx.one(sql.unsafe`
    WITH ${envelopes.length > 0 ? sql.fragment`outbox_ins AS (${outboxInsert(envelopes)}),` : sql.fragment``}
    ${usageCtes(rows)}
    SELECT ${usageOutcome}`)) as unknown as UsageOutcome
  await finishUsage(tx, usage, rows, out)
}
