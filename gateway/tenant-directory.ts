// Tenants as the hot paths need them (salt, defaults, routing behaviour), cached in memory and
// refreshed when a tenant's config changes on this node or, through the bus, on another.
import { sql, type DatabasePool } from 'slonik'
import type { Engine } from '../engine/index.js'
import { TIER_LIMITS, type ConsentPrompt, type E164, type ExpiredCallBehavior, type TenantId, type TenantRouting, type Tier } from '../engine/types.js'

export interface TenantInfo extends TenantRouting {
  status: 'ACTIVE' | 'SUSPENDED'
  salt: Buffer
  defaultGracePeriod: number
  recordingEnabled: boolean
  recordingConsentMode: ConsentPrompt
  concurrentSessions: number
}

interface Row {
  id: string
  tier: Tier
  status: 'ACTIVE' | 'SUSPENDED'
  salt: Buffer
  default_grace_period: number
  recording_enabled: boolean
  recording_consent_mode: ConsentPrompt
  expired_call_behavior: ExpiredCallBehavior
  support_phone: string | null
  recording_consent_audio_url: string | null
}

const COLUMNS = sql.fragment`id, tier, status, salt, default_grace_period, recording_enabled, recording_consent_mode,
  expired_call_behavior, support_phone, recording_consent_audio_url`

function toInfo(r: Row): TenantInfo {
  return {
    id: r.id as TenantId,
    tier: r.tier,
    status: r.status,
    salt: Buffer.from(r.salt),
    defaultGracePeriod: r.default_grace_period,
    recordingEnabled: r.recording_enabled,
    recordingConsentMode: r.recording_consent_mode,
    expiredCallBehavior: r.expired_call_behavior,
    supportPhone: r.support_phone as E164 | null,
    recordingConsentAudioUrl: r.recording_consent_audio_url,
    concurrentSessions: TIER_LIMITS[r.tier].concurrentSessions,
  }
}

export class TenantDirectory {
  readonly #db: DatabasePool
  readonly #engine: Engine
  readonly #cache = new Map<string, TenantInfo>()
  /** Changed since cached: the next get() reloads (defaults, salt, status) from Postgres. */
  readonly #stale = new Set<string>()

  constructor(db: DatabasePool, engine: Engine) {
    this.#db = db
    this.#engine = engine
  }

  /** Boot: every tenant into the cache and the engine (routing needs each proxy's tenant). */
  async loadAll(): Promise<number> {
    const rows = await this.#db.any(sql.unsafe`SELECT ${COLUMNS} FROM tenants`) as readonly Row[]
    for (const r of rows) this.#put(toInfo(r))
    return rows.length
  }

  async get(id: string): Promise<TenantInfo | null> {
    const hit = this.#cache.get(id)
    return hit && !this.#stale.has(id) ? hit : this.refresh(id)
  }

  /**
   * A tenant's config changed (on this node, or on another through the bus). Routing takes the
   * new behaviour at once, synchronously; the rest is reloaded on the next get().
   */
  changed(routing: TenantRouting | { id: string }): void {
    const hit = this.#cache.get(routing.id)
    this.#stale.add(routing.id)
    if (hit && 'expiredCallBehavior' in routing) {
      Object.assign(hit, { tier: routing.tier, expiredCallBehavior: routing.expiredCallBehavior, supportPhone: routing.supportPhone, recordingConsentAudioUrl: routing.recordingConsentAudioUrl })
      this.#engine.upsertTenant(hit)
    }
    void this.refresh(routing.id).catch(() => {})
  }

  peek(id: string): TenantInfo | undefined {
    return this.#cache.get(id)
  }

  async refresh(id: string): Promise<TenantInfo | null> {
    this.#stale.delete(id)
    const r = await this.#db.maybeOne(sql.unsafe`SELECT ${COLUMNS} FROM tenants WHERE id = ${id}`) as Row | null
    if (!r) { this.#cache.delete(id); return null }
    const info = toInfo(r)
    this.#put(info)
    return info
  }

  #put(info: TenantInfo) {
    const prev = this.#cache.get(info.id)
    if (prev) Object.assign(prev, info) // sessions hold the same object: routing sees the change at once
    else this.#cache.set(info.id, info)
    this.#engine.upsertTenant(prev ?? info)
  }
}
