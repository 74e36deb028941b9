// Pool alerts at the edge (contract D12). The engine computes crossings (engine/pool-alerts.ts)
// from its pool counts; this checks them every second (a level is about the pool, not about one
// create: a check per create would cost a walk of the cooling numbers on the create path, and
// a second of delay is nothing for an alert) and announces each crossing once:
//
// Who emits, with several nodes: every node holds the same pool (sessions reach every engine
// through the bus), so every node sees the same crossing, a few milliseconds apart. Recovery
// happens through time as well (numbers leaving cooldown), with no create or end to attribute it
// to, so "the node whose allocation crossed" cannot name the emitter of every crossing. Postgres
// does, as it does for expiry: a conditional update of the region's row in pool_alert_levels
// (deeper than recorded, or back to 0 from low) succeeds on exactly one node, which logs the
// warning and writes the pool.low events (outbox, same transaction) and announces them; on the
// others it changes nothing and they stay silent. A node that boots takes the recorded levels, so
// a restart does not alert again (and a recovery while every node was down is still announced).
import type { Logger } from 'pino'
import type { Engine } from '../../engine/index.js'
import { PoolAlerts, type PoolCrossing, type PoolLevel } from '../../engine/pool-alerts.js'
import { newEnvelope } from '../../sql/vocabulary/event-envelope.js'
import { loadPoolAlertLevels, recordPoolCrossing } from '../../sql/pool-alerts.js'
import type { Db } from '../../sql/transaction.js'
import type { Hub } from '../../sql/hub.js'

export const POOL_CHECK_MS = 1_000

export interface PoolAlerterDeps {
  db: Db
  engine: Pick<Engine, 'poolCounts' | 'tenantsLiveIn'>
  log: Logger
  now: () => number
  /** After commit, `events` (this node's stream clients, the other nodes, the webhook dispatcher). */
  hub: Hub
  checkMs?: number
}

/** Checks nothing until `start()` (the boot's, once the engine holds its pool). */
export function createPoolAlerter(d: PoolAlerterDeps) {
  const alerts = new PoolAlerts()
  let timer: NodeJS.Timeout | undefined
  let running: Promise<void> = Promise.resolve()

  async function emit(c: PoolCrossing, at: number): Promise<void> {
    const state = c.to === 0 ? 'RECOVERED' : 'LOW'
    const counts = { region: c.region, threshold: c.threshold, total: c.total, available: c.available, inUse: c.inUse, cooldown: c.cooldown }
    const tenants = d.engine.tenantsLiveIn(c.region)
    const envelopes = await recordPoolCrossing(d.db, c.region, c.to, tenants.map(tenantId => newEnvelope('pool.low', at, { tenantId, state, ...counts })))
    if (envelopes === null) return // another node announced it
    d.log.warn({ code: 'pool-low', state, alertLevel: c.to, ...counts, tenants: envelopes.length }, // `level` is pino's
      c.to === 0 ? 'proxy pool recovered' : 'proxy pool low')
    d.hub.emit('events', envelopes)
  }

  /** One check now; crossings are announced before it resolves (tests drive it). */
  function check(): Promise<void> {
    running = running.then(async () => {
      const at = d.now()
      for (const c of alerts.check(d.engine.poolCounts(at))) {
        try {
          await emit(c, at)
        } catch {
          // Postgres away: back to the level before, so the next check finds the crossing again.
          alerts.set(c.region, c.from)
          d.log.warn({ code: 'pool-alert' }, 'recoverable error')
        }
      }
    })
    return running
  }

  return {
    /** Takes the recorded levels (a restart does not alert again), then checks every second. */
    async start() {
      for (const r of await loadPoolAlertLevels(d.db)) alerts.set(r.region, r.level as PoolLevel)
      timer = setInterval(() => void check(), d.checkMs ?? POOL_CHECK_MS)
      timer.unref()
    },
    check,
    /** The level of a region as this node knows it (metrics). */
    level: (region: string) => alerts.level(region),
    close: async () => { clearInterval(timer); await running },
  }
}

export type PoolAlerter = ReturnType<typeof createPoolAlerter>
