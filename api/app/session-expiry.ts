// Expiry (contract 3.1) and inactivity ends (contract D10) of live sessions, run by the expiry
// sweep (gateway/service.ts): the engine expires in memory; the database decides who writes the
// event, so a session expires once whatever node's sweep reaches it first.
import { expiryEvent, type Plan } from '../../engine/index.js'
import type { SessionId, SessionRecord } from '../../engine/types.js'
import type { EventEnvelope } from '../../sql/vocabulary/event-envelope.js'
import * as store from '../../sql/sessions.js'
import { getLiveSessionStates } from '../../sql/session-load.js'
import { envelopesOf, type RunnerDeps } from './session-runner.js'

const EXPIRY_BATCH = 5_000
const MINUTE = 60_000

/** The expiry sweep's step: `commitOrLoad` applies a committed plan to memory (the runner's). */
export function createExpiry(d: RunnerDeps, commitOrLoad: (plan: Extract<Plan, { ok: true }>) => void): () => Promise<number> {
  /** Expired in memory, not yet written (the database refused): retried by the next sweep. */
  const unwritten: SessionRecord[] = []

  /** Contract 3.1 expiry of what tick() handed out; the database decides who writes the event. */
  async function expire(due: SessionRecord[]): Promise<number> {
    if (!due.length) return 0
    await d.flushRecords?.()
    let written = 0
    for (let i = 0; i < due.length; i += 500) {
      const batch = due.slice(i, i + 500)
      const byId = new Map<string, EventEnvelope[]>()
      let expired: string[]
      try {
        expired = await store.expireSessions(d.db, batch, rec => {
          const envs = envelopesOf([expiryEvent(rec)])
          byId.set(rec.id, envs)
          return envs
        })
      } catch (err) {
        unwritten.push(...due.slice(i))
        throw err
      }
      for (const id of expired) {
        const rec = batch.find(r => r.id === id)
        d.hub.emit('session', id, rec?.version ?? 0, byId.get(id) ?? [])
      }
      written += expired.length
    }
    return written
  }

  /**
   * contract D10: sessions idle past their inactivity timeout end as POST /end would, once, whatever
   * node's deadline fires first: the store writes the end only if the session is still at the
   * version memory planned from, still ACTIVE and idle as it knows it (the calls and SMS of every
   * node). A session it refuses is reloaded if another node changed it, and re-armed from the
   * activity the store saw; one it could not reach is re-armed as it was, for the next sweep.
   */
  async function endIdle(recs: SessionRecord[]): Promise<void> {
    if (recs.length === 0) return
    const now = d.now()
    const ends: store.IdleEnd[] = []
    for (const prev of recs) {
      const plan = d.engine.plan(prev, { type: 'end' }, now)
      const minutes = prev.inactivityTimeoutMinutes ?? 0
      if (!plan.ok || !plan.changed || minutes === 0) d.engine.resumeIdle(prev.id, null)
      else ends.push({ prev, next: plan.next, idleBefore: now - minutes * MINUTE })
    }
    let res: Awaited<ReturnType<typeof store.endIdleSessions>>
    try {
      res = await store.endIdleSessions(d.db, ends)
    } catch (err) {
      for (const e of ends) d.engine.resumeIdle(e.prev.id, null)
      throw err
    }
    const ended = new Set(res.ended)
    const refused: string[] = []
    for (const e of ends) {
      if (ended.has(e.prev.id)) {
        commitOrLoad({ ok: true, prev: e.prev, next: e.next, events: [], changed: true })
        d.hub.emit('session', e.prev.id, e.next.version, [])
      } else {
        refused.push(e.prev.id)
      }
    }
    if (refused.length === 0) return
    try {
      for (const s of await getLiveSessionStates(d.db, refused, d.cipher)) d.engine.load(s.rec, s.extras)
    } finally {
      for (const id of refused) d.engine.resumeIdle(id as SessionId, res.activeAt.get(id) ?? null)
    }
  }

  return async function expireDue(): Promise<number> {
    // Bounded per sweep so a burst of deadlines never blocks the event loop; the rest stop
    // routing at expiresAt anyway and expire on the next sweep. The engine forgets a session
    // when it ticks it, so what the database did not take (it was down) is kept and retried:
    // expireSessions only moves rows that are still live, so a retry is safe.
    const due = [...unwritten.splice(0), ...d.engine.tick(d.now(), EXPIRY_BATCH)]
    // contract D10: what tick() found idle is ended (or re-armed) whatever becomes of the expiries.
    const idle = d.engine.idleDue()
    try {
      return await expire(due)
    } finally {
      await endIdle(idle)
    }
  }
}
