// The record writer's operations as plain data (sql/record-writer.ts queues them, sql/journal.ts
// writes them to disk, sql/record-apply.ts applies them): call and SMS rows, a call's later
// callbacks, SMS forward and status outcomes, what each causes; the writer's interface, one method
// an operation; and its memory of young calls. Being data, a batch can be journaled and replayed;
// applying one is idempotent.
import { callEnvelope, type EventEnvelope } from './vocabulary/event-envelope.js'
import type { CallDirection, CallStatus, SmsStatus } from '../engine/types.js'
import type { UsageInput } from './billing.js'
import type { ReplayBatch } from './journal.js'
import { Recent } from '../engine/recent.js'

export interface CallInsert {
  id: string
  sessionId: string
  tenantId: string
  providerCallId: string
  status: CallStatus
  direction: CallDirection
  initiatedAt: number
  /** The party B hash in force when the call was routed (contract 2.2). */
  partyBHash: string
  /** The session's proxy (not stored with the call): for the events of its later callbacks. */
  proxy?: string
  durationSeconds?: number
  answeredAt?: number | null
  endedAt?: number | null
  recordingConsentPlayed?: boolean
}

export type CallKey = { callId: string } | { providerCallId: string }

/** A provider callback about a call, applied against the call's state when its batch commits. */
export interface CallCallback {
  /** Our callId (the query of the callback URLs we put in TeXML), or the provider's CallSid of
   * the inbound call (the TeXML application's own status callback). */
  key: CallKey
  /** 'status' = the Number statusCallback, 'dial-status' = the Dial action, 'parent-status' = the
   * inbound call's own status, 'recording' = the recording callback. */
  source: 'status' | 'dial-status' | 'parent-status' | 'recording'
  /** CallStatus / DialCallStatus / RecordingStatus as sent. */
  value: string
  duration?: number
  recordingUrl?: string
  recordingSid?: string
  at: number
  /**
   * The call as the voice fetch would have recorded it, when the engine can still place it: a
   * record lost in a crash window is created from it, so the final record exists (contract D5).
   * Written only when no record exists for the call.
   */
  rebuild?: CallInsert
}

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
  /** Why a FAILED message never reached the provider (contract D11): opted_out, channel. */
  reason?: 'opted_out' | 'channel' | null
}

/** What an operation causes when it takes effect, written in its transaction. */
export interface Effects {
  events?: EventEnvelope[]
  usage?: UsageInput[]
}

/** The stored message for an inbound id: the new row, or the one a replay found. */
export interface SmsClaim {
  id: string
  status: SmsStatus
}

/**
 * A new call's events made from its row when its batch is applied (callStartEvents), instead of
 * envelopes made at the fetch: a journal line then carries the row alone (the envelope was most of
 * its text), and nothing is lost by making them late, since an event is seen only once its row
 * has committed and a row already there writes none.
 */
export const CALL_START = 'start'

export type OpData =
  | { kind: 'call'; row: CallInsert; events?: EventEnvelope[] | typeof CALL_START | undefined }
  | { kind: 'call-event'; cb: CallCallback }
  | { kind: 'sms'; row: SmsInsert; effects?: Effects | undefined }
  | { kind: 'sms-forward'; id: string; forwardId: string | null; status: SmsStatus; at: number; effects?: Effects | undefined }
  | { kind: 'sms-status'; forwardId: string; status: SmsStatus; deliveredAt: number | null }

export type Result = string | boolean | SmsClaim | null

/**
 * Each event's JSON text, made once: a call given its events carries them twice, in its journal
 * line (opsJson) and in the statement that writes them (insertCalls), and the envelope is most of
 * a call's text (bench/RESULTS.md, "What moved the figures", 1d15548). A voice fetch's own are made
 * at apply instead (CALL_START) and never journaled.
 */
const envelopeTexts = new WeakMap<EventEnvelope, string>()

export function envelopeJson(env: EventEnvelope): string {
  let text = envelopeTexts.get(env)
  if (text === undefined) {
    text = JSON.stringify(env)
    envelopeTexts.set(env, text)
  }
  return text
}

/** JSON.stringify(ops), a call's events written through envelopeJson. */
export function opsJson(ops: readonly OpData[]): string {
  let out = '['
  for (let i = 0; i < ops.length; i++) {
    const op = ops[i]!
    if (i > 0) out += ','
    out += op.kind === 'call' && Array.isArray(op.events)
      ? `{"kind":"call","row":${JSON.stringify(op.row)},"events":[${op.events.map(envelopeJson).join(',')}]}`
      : JSON.stringify(op)
  }
  return out + ']'
}

/**
 * A voice fetch's events (contract D5), from the record it wrote: `call.incoming`, and for a call
 * refused by its session's direction mode or channels (recorded FAILED) `call.failed` as well.
 */
export function callStartEvents(row: CallInsert): EventEnvelope[] {
  const data = { sessionId: row.sessionId, tenantId: row.tenantId, proxyNumber: row.proxy ?? '', callId: row.id, direction: row.direction, status: 'RINGING', durationSeconds: 0 }
  const incoming = callEnvelope('call.incoming', row.initiatedAt, data)
  if (row.status !== 'FAILED') return [incoming]
  return [incoming, callEnvelope('call.failed', row.endedAt ?? row.initiatedAt, { ...data, status: 'FAILED' })]
}

/** What the writer remembers of a young call, so its callbacks need no read. */
export interface CallState {
  id: string
  providerCallId: string
  sessionId: string
  tenantId: string
  proxy: string
  direction: CallDirection
  status: CallStatus
  answered: boolean
  hasRecordingUrl: boolean
}

export interface CallCache {
  get(callId: string): CallState | undefined
  bySid(providerCallId: string): CallState | undefined
}

export const failedResult = (op: OpData): Result => (op.kind === 'call' || op.kind === 'sms' ? null : false)

export interface RecordWriter {
  /**
   * Resolves with the id stored for this provider call id (an earlier one on replay), null when
   * it was refused. `events` are written with a new row only; CALL_START: the voice fetch's own,
   * made from the row when it is applied (sql/record-ops.ts callStartEvents).
   */
  upsertCall(row: CallInsert, events?: EventEnvelope[] | typeof CALL_START): Promise<string | null>
  /** A status, dial-status or recording callback; true when it changed the call. */
  callEvent(cb: CallCallback): Promise<boolean>
  /** The stored message for this inbound id (new, or found by a replay), null when refused. */
  upsertSms(row: SmsInsert, effects?: Effects): Promise<SmsClaim | null>
  /** The outcome of forwarding the QUEUED message `id`; true when it was still QUEUED. */
  markSmsForwarded(id: string, forwardMessageId: string | null, status: SmsStatus, at: number, effects?: Effects): Promise<boolean>
  /** QUEUED < SENT < DELIVERED | FAILED: a status only moves forward. */
  updateSmsStatusByForwardId(forwardMessageId: string, status: SmsStatus, deliveredAt?: number | null): Promise<boolean>
  /** Resolves once everything queued so far is applied (or refused). */
  flush(): Promise<void>
  /** Resolves once everything queued so far survives a crash: in the journal, or applied. */
  sync(): Promise<void>
  /** Applies batches a previous run left in the journal (boot, before serving). */
  replay(batches: readonly ReplayBatch[]): Promise<void>
  stats(): WriterStats
  /** Stops taking operations and drains for at most `graceMs`; what is left stays in the journal. */
  close(graceMs?: number): Promise<void>
}

export interface WriterStats {
  /** Operations answered for and not yet in Postgres. */
  pending: number
  /** Of those, held only in the journal (past the memory bound). */
  spilled: number
  /** Applies that failed and were retried, since start. */
  retries: number
  /** Operations Postgres refused for good, since start. */
  refused: number
}

/** The calls this node committed lately, by id and by the provider's CallSid (bounded: engine/recent.ts). */
export class CallMemory {
  readonly #byId: Recent<CallState>
  readonly #bySid: Recent<CallState>
  constructor(max: number, maxAgeMs: number) {
    const age = { maxAgeMs, now: () => performance.now() }
    this.#byId = new Recent(max, age)
    this.#bySid = new Recent(max, age)
  }
  get(id: string): CallState | undefined { return this.#byId.get(id) }
  bySid(sid: string): CallState | undefined { return this.#bySid.get(sid) }
  set(c: CallState): void {
    this.#byId.set(c.id, c)
    this.#bySid.set(c.providerCallId, c)
  }
}
