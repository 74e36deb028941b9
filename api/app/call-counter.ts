// contract 2.2 callCount / lastCallAt of live sessions, exact in memory while the call records are still
// being written behind (contract D4: GET /v1/sessions/:id answers from memory).
//
// Postgres counts a call by its record (sql/call-count.ts; sql/record-apply.ts insertCalls: a replayed
// CallSid inserts nothing). This node counts a call it routes at once (noteCall), and takes it back
// if the record turns out not to be inserted. The record writer announces the call.incoming event
// of every record it inserted, synchronously before it settles the operations (sql/record-writer.ts
// applyWithRetry), so by the time a routed call's operation settles we know which it was:
//   routed here, announced       → inserted: the count stands
//   routed here, not announced   → a replay or a refusal: unnoteCall
//   announced, not routed here   → a record rebuilt from a later callback: count it now
// Calls recorded by other nodes arrive as their call.incoming events over the bus and are counted
// then (so another node's figure trails by the bus delay, see docs/scaling.md). Their SMS events
// move the session's activity mark likewise (contract D10: the inactivity clock), as this node's SMS
// callback does for its own.
import type { Engine, LiveView } from '../../engine/index.js'
import type { SessionId } from '../../engine/types.js'
import type { EventEnvelope } from '../../sql/vocabulary/event-envelope.js'

interface Pending { sessionId: SessionId; at: number; prevLastCallAt: number | null }

export interface CallCounter {
  /** A call the voice fetch just routed (to `session`, looked up once by the fetch) and queued a record for. */
  routed(session: LiveView | undefined, callId: string, at: number): void
  /** That call's record operation settled (call after the writer resolved it). */
  settled(callId: string): void
  /** Events the local record writer committed. */
  committed(events: readonly EventEnvelope[]): void
  /** An event another node committed. */
  remote(event: EventEnvelope): void
  /** Routed calls whose record has not settled yet (docs/memory-bounds.md). */
  readonly pending: number
}

export function createCallCounter(engine: Engine): CallCounter {
  const pending = new Map<string, Pending>()

  function count(e: EventEnvelope) {
    if (e.type === 'call.incoming') engine.live(e.data.sessionId as SessionId)?.noteCall(Date.parse(e.createdAt))
  }

  function remote(e: EventEnvelope) {
    if (e.type === 'sms.received' || e.type === 'sms.blocked') engine.live(e.data.sessionId as SessionId)?.noteActivity(Date.parse(e.createdAt))
    else count(e)
  }

  return {
    routed(session, callId, at) {
      if (session !== undefined) pending.set(callId, { sessionId: session.id, at, prevLastCallAt: session.noteCall(at) })
    },
    settled(callId) {
      const p = pending.get(callId)
      if (p === undefined) return
      pending.delete(callId)
      engine.live(p.sessionId)?.unnoteCall(p.at, p.prevLastCallAt)
    },
    committed(events) {
      for (const e of events) {
        if (e.type !== 'call.incoming') continue
        if (!pending.delete(e.data.callId ?? '')) count(e)
      }
    },
    remote,
    get pending() { return pending.size },
  }
}
