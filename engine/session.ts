// The pure transition function of one session (contract 3.1, contract D4): (record, message, now) →
// next record + events, or a rejection. No memory, no index, no clock: the Engine adds the
// checks that need the proxy index (swap overlap) and applies the result.
import { eventOf, type EngineEvent } from './events.js'
import type { Rejection } from './rejections.js'
import type { E164, SessionRecord, SessionState } from './types.js'

export type SessionMsg =
  | { type: 'end' }
  | { type: 'swap-target'; customerPhone: E164 }
  | { type: 'patch'; gracePeriodMinutes?: number; inactivityTimeoutMinutes?: number | null }
  | { type: 'timer-fired' }

export type StepResult =
  | { ok: true; next: SessionRecord; events: EngineEvent[]; changed: boolean }
  | { ok: false; rejection: Rejection }

const MINUTE = 60_000

/** PENDING, ACTIVE, GRACE_PERIOD: the states that hold a proxy and count against the quota (contract 8.2). */
export function isLive(state: SessionState): boolean {
  return state === 'ACTIVE' || state === 'GRACE_PERIOD' || state === 'PENDING'
}

export function step(s: SessionRecord, m: SessionMsg, now: number): StepResult {
  switch (m.type) {
    case 'end': {
      // contract 3.1: EXPIRED/FAILED are rejected; ACTIVE (and GRACE_PERIOD again) restart the grace
      // period from now. Grace 0 gives expiresAt = now: unroutable at once, expired at the next tick.
      if (s.state === 'EXPIRED' || s.state === 'FAILED') return reject('session-end-failed')
      return changed({ ...s, state: 'GRACE_PERIOD', endedAt: now, expiresAt: now + s.gracePeriodMinutes * MINUTE, version: s.version + 1 }, [])
    }
    case 'patch': {
      const grace = m.gracePeriodMinutes ?? s.gracePeriodMinutes
      // contract D4: in GRACE_PERIOD the deadline moves to endedAt + grace (already past → the next
      // tick expires it); while ACTIVE, PENDING or ended only the stored value changes.
      const expiresAt = m.gracePeriodMinutes !== undefined && s.state === 'GRACE_PERIOD' ? (s.endedAt ?? now) + grace * MINUTE : s.expiresAt
      // contract D10: null switches the inactivity timeout off; it only ever ends an ACTIVE session.
      const idle = m.inactivityTimeoutMinutes === undefined ? (s.inactivityTimeoutMinutes ?? null) : m.inactivityTimeoutMinutes
      if (grace === s.gracePeriodMinutes && expiresAt === s.expiresAt && idle === (s.inactivityTimeoutMinutes ?? null)) return unchanged(s)
      const next: SessionRecord = { ...s, gracePeriodMinutes: grace, expiresAt, version: s.version + 1 }
      if (m.inactivityTimeoutMinutes !== undefined) next.inactivityTimeoutMinutes = m.inactivityTimeoutMinutes
      return changed(next, [])
    }
    case 'swap-target': {
      // contract 4.2: state first (409), then the agent's own number (422); the overlap with other
      // sessions on the proxy is the Engine's check. Same target: idempotent, no event.
      if (s.state !== 'ACTIVE' && s.state !== 'GRACE_PERIOD') return reject('target-conflict')
      if (m.customerPhone === s.agentPhone) return reject('invalid-target')
      if (m.customerPhone === s.customerPhone) return unchanged(s)
      const next: SessionRecord = { ...s, customerPhone: m.customerPhone, version: s.version + 1 }
      return changed(next, [eventOf('session.target_swapped', now, next)])
    }
    case 'timer-fired': {
      if (!isLive(s.state) || now < s.expiresAt) return unchanged(s)
      const r = expire(s, now)
      return changed(r.next, r.events)
    }
  }
}

/** contract 3.1: the grace period elapsed or the hard timeout hit (the caller checked it is due). */
export function expire(s: SessionRecord, now: number): { next: SessionRecord; events: EngineEvent[] } {
  const next: SessionRecord = { ...s, state: 'EXPIRED', expiredAt: now, version: s.version + 1 }
  return { next, events: [expiryEvent(next)] }
}

/** The session.expired of an expired record: Engine.tick hands out the records, and whoever
 * persists them announces this (api/app/session-runner.ts). */
export function expiryEvent(rec: SessionRecord): EngineEvent {
  return eventOf('session.expired', rec.expiredAt ?? rec.expiresAt, rec)
}

function reject(rejection: Rejection): StepResult {
  return { ok: false, rejection }
}

function unchanged(s: SessionRecord): StepResult {
  return { ok: true, next: s, events: [], changed: false }
}

function changed(next: SessionRecord, events: EngineEvent[]): StepResult {
  return { ok: true, next, events, changed: true }
}
