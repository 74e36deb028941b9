// Another node's change reaches this node as a bus message to reload its session (api/app/reconcile.ts)
// followed by the change's events. Delivered at once, those events could reach this node's
// WebSocket clients before this node routes by the change (a client told "target swapped" whose
// next call, landing here, still rang the old customer). So an event of a session whose reload is
// under way waits for it, at most `waitMs` (Postgres may be away: the event is not held hostage),
// and a session's later events, this node's own included, queue behind it: per-session order holds.
// Events of sessions with nothing under way, and events without a session, go out at once.
import type { EventEnvelope } from '../sql/vocabulary/event-envelope.js'
import { orAfter } from '../api/app/deadline.js'

export interface EventOrderDeps {
  /** Hands an event to this node's clients (the replayer or the stream). */
  deliver: (e: EventEnvelope) => void
  /** Settles when this node's reload of the session ends; null when none runs. */
  reloadUnderWay: (sessionId: string) => Promise<void> | null
  waitMs: number
  /** `deliver` threw for a held event (it was not delivered). */
  onError: (err: unknown) => void
}

export interface EventOrder {
  /** An event of a change committed on this node (its state is in memory already). */
  local(e: EventEnvelope): void
  /** An event another node committed, read from the bus after the message to reload its session. */
  remote(e: EventEnvelope): void
  /** Sessions with events held now (tests). */
  readonly held: number
}

export function createEventOrder(d: EventOrderDeps): EventOrder {
  /** Per session, the delivery of its last held event. */
  const queued = new Map<string, Promise<void>>()

  function send(e: EventEnvelope, remote: boolean): void {
    const id = e.data.sessionId
    const before = id === undefined ? null : queued.get(id) ?? (remote ? d.reloadUnderWay(id) : null)
    if (id === undefined || before === null) {
      d.deliver(e)
      return
    }
    const tail = orAfter(before, d.waitMs, undefined)
      .then(() => { d.deliver(e) })
      .catch(d.onError)
    queued.set(id, tail)
    void tail.then(() => { if (queued.get(id) === tail) queued.delete(id) })
  }

  return {
    local: e => send(e, false),
    remote: e => send(e, true),
    get held() { return queued.size },
  }
}
