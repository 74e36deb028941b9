// SMS opt-outs at the edge (contract D11): the in-memory set the SMS path reads (never waiting on
// I/O), kept equal to Postgres on every node.
// - Boot loads every opted-out party before the service listens.
// - STOP and START are written to Postgres directly, committed before the answer (and before the
//   STOP confirmation is sent), not through the write-behind record writer: an opt-out is rare,
//   and it is a promise made to the party ("you have been unsubscribed") that must survive a
//   crash and hold on every node; a journaled write would be durable on this node's disk only,
//   and another node would keep forwarding until it was applied. When Postgres cannot take it,
//   the callback answers 503 and the provider retries (the message id keeps the retry from
//   confirming twice).
// - Other nodes learn of it from the bus (`{kind:'opt-out'}`, a party hash, never a number) at
//   once, and from the reconciliation sweep (api/app/reconcile.ts) whatever the bus lost: the
//   rows changed since a transaction-id watermark, as for sessions (docs/scaling.md). A STOP and
//   a START of one party on two nodes within a bus round trip may cross; the next sweep (30 s,
//   at once after a bus gap) reads the row as committed and settles it.
import { OptOutSet } from '../../../engine/sms-opt-out.js'
import {
  loadOptOuts, markOptOutConfirmed, optIn, optOut, optOutChangesSince, optOutWatermark, type OptOutKey,
} from '../../../sql/sms-opt-outs.js'
import type { Db } from '../../../sql/transaction.js'
import type { Hub, OptOutChange } from '../../../sql/hub.js'

/** contract D11: a party (by its hash) opted out of, or back into, SMS from a tenant's proxy (a bus message). */
export type OptOutMessage = { kind: 'opt-out' } & OptOutChange

export interface OptOuts {
  readonly set: OptOutSet
  /** STOP, durable when it resolves: whether this message's confirmation is still to be sent. */
  stop(k: OptOutKey, messageId: string): Promise<'confirm' | 'opted-out'>
  confirmed(k: OptOutKey, messageId: string): Promise<void>
  /** START, durable when it resolves. */
  start(k: OptOutKey): Promise<void>
  /** A bus message from another node. */
  apply(m: OptOutMessage): void
  /** The rows changed since the last sweep (reconciliation); throws when Postgres is away (watermark kept). */
  sweep(): Promise<number>
  /** Boot: every opted-out party, read once before the service listens. */
  load(): Promise<void>
}

/** A set as loaded by a boot (another node's view, in tests). */
export async function loadOptOutSet(db: Db, hub: Hub): Promise<OptOuts> {
  const o = createOptOuts(db, hub)
  await o.load()
  return o
}

/** Empty until `load()` (the boot's, gateway/service.ts). */
export function createOptOuts(db: Db, hub: Hub): OptOuts {
  const set = new OptOutSet()
  let since = ''
  const announce = (k: OptOutKey, optedOut: boolean) => hub.emit('optOut', { ...k, optedOut })
  return {
    set,
    async stop(k, messageId) {
      const r = await optOut(db, k, messageId)
      set.add(k.tenantId, k.proxy, k.partyHash)
      announce(k, true)
      return r
    },
    confirmed: (k, messageId) => markOptOutConfirmed(db, k, messageId),
    async start(k) {
      await optIn(db, k)
      set.delete(k.tenantId, k.proxy, k.partyHash)
      announce(k, false)
    },
    apply(m) {
      set.set(m.tenantId, m.proxy, m.partyHash, m.optedOut)
    },
    async sweep() {
      const { changes, next } = await optOutChangesSince(db, since)
      for (const c of changes) set.set(c.tenantId, c.proxy, c.partyHash, c.optedOut)
      since = next
      return changes.length
    },
    async load() {
      since = await optOutWatermark(db) // before the load: what commits during it is swept later
      for (const r of await loadOptOuts(db)) set.add(r.tenantId, r.proxy, r.partyHash)
    },
  }
}
