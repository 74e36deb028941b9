// Inactivity ends (contract D10) between the engine's tick and the store. A call or SMS only moves a
// session's activity mark (LiveSession.noteActivity: a field update, no heap work on the callback
// path), so the deadline armed in the expiry heap may be stale: when it comes, the session is
// checked again. Activity since re-arms it; otherwise it is handed out once (its IDLE_PENDING bit
// set, so its heap key falls back to expiresAt) until the caller settles it: a committed end (a
// new version clears the bit) or resume(), after the store refused or could not be reached.
import { IDLE_PENDING, type LiveSession } from './live-session.js'
import type { SessionRecord } from './types.js'

export class IdleQueue {
  #due: LiveSession[] = []

  /** s's heap key came at `now` and it is not expired: is it idle? (The caller re-keys s.) */
  check(s: LiveSession, now: number): void {
    if (s.idleAt() > now) return
    s.flags |= IDLE_PENDING
    this.#due.push(s)
  }

  /** The records of the sessions handed out since the last drain that are still held and pending. */
  drain(held: (s: LiveSession) => boolean): SessionRecord[] {
    const out: SessionRecord[] = []
    for (const s of this.#due) if (held(s) && (s.flags & IDLE_PENDING) !== 0) out.push(s.toRecord())
    this.#due = []
    return out
  }

  /** The end was not written: armed again from what is known now (the caller re-keys s). */
  resume(s: LiveSession, activeAt: number | null): void {
    s.flags &= ~IDLE_PENDING
    if (activeAt !== null) s.noteActivity(activeAt)
  }
}
