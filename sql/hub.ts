// The one in-process event hub (nanoevents): what changed through this node, emitted where it was
// committed. The record writer, the session runner, the pool alerter, the tenant directory and the
// opt-out store emit into it; the composition root (gateway/compose.ts) subscribes the call
// counter, the event order (WebSocket stream), the bus, the webhook dispatcher and the metrics
// (maskline_events_committed_total).
// Emitters never know who listens: adding a consumer of committed changes is one `hub.on` there.
//
// It lives in sql/ because its lowest emitter (the record writer) does; its payloads are the
// shared vocabulary's. The engine stays out of it: it returns its events as values.
//
// Listeners run synchronously, in the order they subscribed, in the emitter's turn; a listener
// that throws stops the ones after it and the emitter catches it (as each did with its callback).
import { createNanoEvents, type Emitter } from 'nanoevents'
import type { EventEnvelope } from './vocabulary/event-envelope.js'

/** An SMS opt-out (STOP) or opt-in (START) of one party on one proxy number, by the party's hash. */
export interface OptOutChange { tenantId: string; proxy: string; partyHash: string; optedOut: boolean }

export interface HubEvents {
  /** The record writer committed call and SMS records with these outbox events. */
  records(events: EventEnvelope[]): void
  /** A session command committed the session at `version` with these outbox events (maybe none). */
  session(id: string, version: number, events: EventEnvelope[]): void
  /** Outbox events committed apart from records and sessions (pool alerts). */
  events(events: EventEnvelope[]): void
  /**
   * A tenant, its configuration or its API keys changed through this node. The change is answered
   * once every promise handed to `waitUntil` settled (the bus: the other nodes can read it).
   */
  tenant(id: string, waitUntil: (p: Promise<unknown>) => void): void
  /** An opt-out changed through this node (durable when emitted). */
  optOut(change: OptOutChange): void
}

export type Hub = Emitter<HubEvents>

export function createHub(): Hub {
  return createNanoEvents<HubEvents>()
}

/** Emits `tenant` and resolves once what its listeners handed to `waitUntil` settled. */
export async function emitTenantChange(hub: Hub, id: string): Promise<void> {
  const waits: Array<Promise<unknown>> = []
  hub.emit('tenant', id, p => { waits.push(p) })
  await Promise.allSettled(waits)
}
