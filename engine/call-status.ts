// Call status machine (contract D5; contract 3.2 leaves the transitions open). Pure: the handler
// loads the call record, applies the provider's callback and persists/emits only when this
// returns a change. `null` means "answer the provider, change nothing": a duplicate, a status
// that would move backwards, an intermediate status we do not track, or an unknown value.
//
//   RINGING ──in-progress──▶ ANSWERED ──completed / any end of the Dial──▶ COMPLETED (call.ended)
//      │
//      ├─ DialCallStatus=completed|answered, or completed with a duration ──▶ COMPLETED (call.ended)
//      ├─ busy | no-answer | canceled ──▶ MISSED (call.ended)
//      ├─ failed ──▶ FAILED (call.failed)
//      └─ parent leg ended (no answer seen): completed | canceled ──▶ MISSED, failed ──▶ FAILED
//
// Terminal states (COMPLETED, MISSED, FAILED) never change.
//
// The parent leg is the inbound call itself, reported by the TeXML application's own status
// callback. It is `in-progress` as soon as the application answers to play the consent prompt, so
// it never means ANSWERED; and its duration counts the prompt and the ringing, so after an answer it
// never ends the call either: the Dial's callbacks carry the bridged duration, and the Dial action
// always fires when a bridge ends. Only a parent that ends while the call still rings says something
// no other callback will: the caller gave up, possibly during the consent prompt, before the Dial
// (and with it every other callback) ever started.
import type { CallStatus } from './types.js'

export type CallEventName = 'call.answered' | 'call.ended' | 'call.failed'

export interface CallStatusInput {
  /** 'status' = the Number statusCallback (CallStatus), 'dial-status' = the Dial action (DialCallStatus),
   * 'parent-status' = the TeXML application's status callback for the inbound (parent) call. */
  source: 'status' | 'dial-status' | 'parent-status'
  callStatus: string
  /** CallDuration / DialCallDuration in seconds, when the provider sent one. */
  duration?: number
  /** The call record already has an answer time (e.g. answeredAt set by an earlier callback). */
  answeredSeen?: boolean
}

export interface CallStatusChange {
  status: CallStatus
  event: CallEventName | null
  /** Present on terminal transitions: the billed duration for COMPLETED, 0 for MISSED/FAILED. */
  durationSeconds?: number
}

const TERMINAL: ReadonlySet<CallStatus> = new Set<CallStatus>(['COMPLETED', 'MISSED', 'FAILED'])

function seconds(d: number | undefined): number {
  return d !== undefined && Number.isFinite(d) && d > 0 ? Math.floor(d) : 0
}

function completed(duration: number | undefined): CallStatusChange {
  return { status: 'COMPLETED', event: 'call.ended', durationSeconds: seconds(duration) }
}

export function applyCallStatus(current: CallStatus, input: CallStatusInput): CallStatusChange | null {
  if (TERMINAL.has(current)) return null
  const answered = current === 'ANSWERED' || input.answeredSeen === true
  const value = input.callStatus.trim().toLowerCase()
  if (input.source === 'parent-status') return applyParentStatus(value, answered)
  switch (value) {
    case 'queued':
    case 'initiated':
    case 'ringing':
      // RINGING is set at the voice fetch; these carry nothing new, and after an answer they are
      // late arrivals that must not move the call backwards.
      return null
    case 'in-progress':
    case 'answered':
      // DialCallStatus=answered is sent when the Dial ended after a bridge: the call is over.
      if (input.source === 'dial-status') return completed(input.duration)
      return current === 'RINGING' ? { status: 'ANSWERED', event: 'call.answered' } : null
    case 'completed':
      // The Dial action always fires when the Dial ends, so it is authoritative. A status-callback
      // `completed` counts only after an answer (or with a positive duration, when the
      // `in-progress` callback was lost or is still in flight); otherwise the dial-status decides.
      if (input.source === 'dial-status' || answered || seconds(input.duration) > 0) return completed(input.duration)
      return null
    case 'busy':
    case 'no-answer':
    case 'canceled':
    case 'failed':
      // An answered call that then reports a failure was still bridged and billed minutes: it ends
      // as COMPLETED rather than being rewritten as missed or failed.
      if (answered) return completed(input.duration)
      return value === 'failed'
        ? { status: 'FAILED', event: 'call.failed', durationSeconds: 0 }
        : { status: 'MISSED', event: 'call.ended', durationSeconds: 0 }
    default:
      return null
  }
}

function applyParentStatus(value: string, answered: boolean): CallStatusChange | null {
  if (answered) return null
  switch (value) {
    case 'completed':
    case 'canceled':
    case 'busy':
    case 'no-answer':
      return { status: 'MISSED', event: 'call.ended', durationSeconds: 0 }
    case 'failed':
      return { status: 'FAILED', event: 'call.failed', durationSeconds: 0 }
    default:
      return null
  }
}

/** `call_minute` / `recording_minute` units: whole minutes, rounded up (0 s → 0). */
export function billableMinutes(seconds: number): number {
  return Number.isFinite(seconds) && seconds > 0 ? Math.ceil(seconds / 60) : 0
}

/** Parses CallDuration / DialCallDuration / RecordingDuration; `undefined` when absent or not a
 * non-negative integer. */
export function parseDurationSeconds(raw: string | undefined): number | undefined {
  if (raw === undefined || !/^\d{1,9}$/.test(raw)) return undefined
  return Number(raw)
}
