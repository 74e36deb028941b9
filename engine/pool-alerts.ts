// Pool alerts (contract D12): when a region's free share of proxy numbers falls below 20 %,
// 10 % and 5 %, and when it recovers above 25 %, one alert each. Pure: given the pool counts
// (engine.poolCounts, free = available: neither in use nor cooling down), it returns the
// crossings since the last check; the edge logs, counts and emits them.
//
// Hysteresis: a region's level only rises while it is low (one alert per threshold crossed, not
// one per create, and none for wobbling around a threshold) and goes back to 0 only above 25 %.
// A fall past several thresholds at once is one crossing, to the deepest level.
import type { PoolCount } from './engine.js'

/** Level n (1..3) is entered below POOL_THRESHOLDS[n - 1] percent free. */
export const POOL_THRESHOLDS = [20, 10, 5] as const
export const POOL_RECOVERY_PERCENT = 25
export type PoolLevel = 0 | 1 | 2 | 3

export interface RegionPoolCount { region: string; total: number; available: number; inUse: number; cooldown: number }

export interface PoolCrossing extends RegionPoolCount {
  from: PoolLevel
  to: PoolLevel
  /** The threshold crossed: 20, 10 or 5 going down, 25 on recovery. */
  threshold: number
}

/** The next level of a region, from its level and its free share now. */
export function nextPoolLevel(level: PoolLevel, available: number, total: number): PoolLevel {
  if (total <= 0) return level
  const percent = (available / total) * 100
  let worst: PoolLevel = 0
  for (let i = 0; i < POOL_THRESHOLDS.length; i++) if (percent < POOL_THRESHOLDS[i]!) worst = (i + 1) as PoolLevel
  if (worst > level) return worst
  if (level > 0 && percent > POOL_RECOVERY_PERCENT) return 0
  return level
}

/** Counts per region (every provider of a region together). */
export function regionCounts(counts: readonly PoolCount[]): RegionPoolCount[] {
  const by = new Map<string, RegionPoolCount>()
  for (const c of counts) {
    const r = by.get(c.region) ?? { region: c.region, total: 0, available: 0, inUse: 0, cooldown: 0 }
    r.total += c.total
    r.available += c.available
    r.inUse += c.inUse
    r.cooldown += c.cooldown
    by.set(c.region, r)
  }
  return [...by.values()]
}

export class PoolAlerts {
  readonly #levels = new Map<string, PoolLevel>()

  level(region: string): PoolLevel {
    return this.#levels.get(region) ?? 0
  }

  /** The level recorded elsewhere (the cluster's, at boot), or the one before a crossing that could not be announced. */
  set(region: string, level: PoolLevel): void {
    this.#levels.set(region, level)
  }

  levels(): Array<{ region: string; level: PoolLevel }> {
    return [...this.#levels].map(([region, level]) => ({ region, level }))
  }

  /** The crossings since the last check; the levels move with them. */
  check(counts: readonly PoolCount[]): PoolCrossing[] {
    const out: PoolCrossing[] = []
    for (const r of regionCounts(counts)) {
      const from = this.level(r.region)
      const to = nextPoolLevel(from, r.available, r.total)
      if (to === from) continue
      this.#levels.set(r.region, to)
      out.push({ ...r, from, to, threshold: to === 0 ? POOL_RECOVERY_PERCENT : POOL_THRESHOLDS[to - 1]! })
    }
    return out
  }
}
