// The one tenant directory: every tenant's state (status, tier, salt, defaults,
// routing) and every live API credential (apiKey hash → tenant, secret MAC), in memory, loaded at
// boot and kept current:
// - a change made through this node (config, signup, rotation, suspension) applies here at once
//   and is announced on the bus (`{kind:'tenant', id}`: "reload this tenant and its keys");
// - a change announced by another node applies as soon as its message arrives: the tenant's
//   cached state and keys are set aside synchronously, so a request arriving during the reload
//   waits for it (or asks Postgres) instead of being answered from what was there before;
// - resync() reloads everything and is run on a timer by the composition root: it catches what
//   the bus lost (a Redis outage drops its messages) and edits made in SQL by hand.
// A tenant or key this node has not seen (made on another node a moment ago) is loaded from
// Postgres once on its first use, then kept. The SQL lives in sql/tenants.ts.
//
// Generations: every change to a tenant bumps its generation; a load only applies what it read
// if the generation it started under is still current, so a slow read from before a change never
// overwrites the change.
import type { DatabasePool } from 'slonik'
import { TIER_LIMITS, type ConsentPrompt, type E164, type TenantId, type TenantRouting } from '../../engine/types.js'
import type { AuthDirectory } from '../auth/authenticate.js'
import { emitTenantChange, type Hub } from '../../sql/hub.js'
import {
  findCredential, getTenantState, liveCredentialsFingerprint, liveCredentialsOf, loadLiveCredentials, loadTenantStates, setTenantStatus,
  type ApiCredential, type TenantState, type TenantStatus,
} from '../../sql/tenants.js'

export interface TenantInfo extends TenantRouting {
  status: TenantStatus
  salt: Buffer
  defaultGracePeriod: number
  recordingEnabled: boolean
  recordingConsentMode: ConsentPrompt
  concurrentSessions: number
  /** contract D11: sent from a proxy on STOP and HELP; null: the default text. */
  smsOptOutText: string | null
  smsHelpText: string | null
}

export interface TenantDirectoryOptions {
  /** Told of every tenant loaded or changed (the engine's routing: `engine.upsertTenant`). */
  upsert?: (t: TenantInfo) => void
  /** A tenant or its keys changed through this node: `tenant` (the bus tells the other nodes). */
  hub?: Hub
}

function toInfo(r: TenantState): TenantInfo {
  return {
    id: r.id as TenantId,
    tier: r.tier,
    status: r.status,
    salt: r.salt,
    defaultGracePeriod: r.defaultGracePeriod,
    recordingEnabled: r.recordingEnabled,
    recordingConsentMode: r.recordingConsentMode,
    expiredCallBehavior: r.expiredCallBehavior,
    supportPhone: r.supportPhone as E164 | null,
    recordingConsentAudioUrl: r.recordingConsentAudioUrl,
    concurrentSessions: TIER_LIMITS[r.tier].concurrentSessions,
    smsOptOutText: r.smsOptOutText,
    smsHelpText: r.smsHelpText,
  }
}

/** A change made through the API: the routing, and the tenant's SMS texts when the change carries them. */
export type TenantChange = TenantRouting & { smsTexts?: Pick<TenantInfo, 'smsOptOutText' | 'smsHelpText'> }

const keyOf = (keyHash: Buffer) => keyHash.toString('base64')

export class TenantDirectory implements AuthDirectory {
  readonly #db: DatabasePool
  readonly #upsert: (t: TenantInfo) => void
  readonly #hub: Hub | null
  readonly #tenants = new Map<string, TenantInfo>()
  /** Live credentials by the base64 of their key hash. */
  readonly #keys = new Map<string, ApiCredential>()
  readonly #keysOf = new Map<string, Set<string>>()
  /** Tenants changed since their state was read: readers wait for the reload. */
  readonly #reloading = new Map<string, Promise<TenantInfo | null>>()
  readonly #gen = new Map<string, number>()
  /** Bumped by every change to any tenant. */
  #epoch = 0
  /** The credentials' fingerprint when resync() last loaded them all. */
  #credentialsLoaded: string | null = null

  constructor(db: DatabasePool, opts: TenantDirectoryOptions = {}) {
    this.#db = db
    this.#upsert = opts.upsert ?? (() => {})
    this.#hub = opts.hub ?? null
  }

  /** Boot: every tenant and every live credential. */
  async loadAll(): Promise<number> {
    return this.resync()
  }

  /**
   * Reloads every tenant, and every credential unless their fingerprint is the one of the last
   * full load (sql/tenants.ts liveCredentialsFingerprint). Tenants changed while it read are left
   * to their own reload. Returns the number of tenants.
   */
  async resync(): Promise<number> {
    const gens = new Map(this.#gen)
    // Read before the credentials: a change made between the two only makes the next resync
    // reload again, never skip a change.
    const fingerprint = await liveCredentialsFingerprint(this.#db)
    const keysChanged = fingerprint !== this.#credentialsLoaded
    const [states, creds] = await Promise.all([loadTenantStates(this.#db), keysChanged ? loadLiveCredentials(this.#db) : null])
    const byTenant = new Map<string, ApiCredential[]>()
    for (const c of creds ?? []) {
      const list = byTenant.get(c.tenantId)
      if (list) list.push(c)
      else byTenant.set(c.tenantId, [c])
    }
    for (const s of states) {
      if ((this.#gen.get(s.id) ?? 0) !== (gens.get(s.id) ?? 0) || this.#reloading.has(s.id)) continue
      this.#put(toInfo(s))
      if (creds) this.#setKeys(s.id, byTenant.get(s.id) ?? [])
    }
    if (creds) this.#credentialsLoaded = fingerprint
    return states.length
  }

  /** A tenant, from memory; loaded once from Postgres if this node has not seen it (or it is being reloaded). */
  async get(id: string): Promise<TenantInfo | null> {
    const pending = this.#reloading.get(id)
    if (pending) return pending
    return this.#tenants.get(id) ?? this.#reload(id)
  }

  /** Synchronous: what is in memory, even while a reload is under way (routing of a live call). */
  peek(id: string): TenantInfo | undefined {
    return this.#tenants.get(id)
  }

  /** The authenticator's view: undefined unless current (not known here, or being reloaded). */
  peekTenant(id: string): TenantInfo | undefined {
    return this.#reloading.has(id) ? undefined : this.#tenants.get(id)
  }

  tenant(id: string): Promise<TenantInfo | null> {
    return this.get(id)
  }

  /** The live credential of an apiKey hash: from memory, or (a key this node has not seen) from Postgres once. */
  credential(keyHash: Buffer): ApiCredential | null | Promise<ApiCredential | null> {
    const hit = this.#keys.get(keyOf(keyHash))
    if (hit && !this.#reloading.has(hit.tenantId)) return hit
    return this.#findKey(keyHash)
  }

  async #findKey(keyHash: Buffer): Promise<ApiCredential | null> {
    const epoch = this.#epoch
    const c = await findCredential(this.#db, keyHash)
    if (!c) return null
    // Kept only if no tenant changed while we read (a rotation announced meanwhile may have revoked it).
    if (this.#epoch === epoch && !this.#reloading.has(c.tenantId)) this.#addKey(c)
    return c
  }

  /** Reloads a tenant's state and keys (another node changed them); what was cached is not served meanwhile. */
  refresh(id: string): Promise<TenantInfo | null> {
    return this.#reload(id)
  }

  /**
   * A tenant or its keys changed (announced by another node, or through this one). Routing takes
   * a given new behaviour at once, synchronously; state and keys are reloaded, and until then
   * the authenticator does not answer from the old ones.
   */
  changed(routing: TenantChange | { id: string }): void {
    const hit = this.#tenants.get(routing.id)
    if (hit && 'expiredCallBehavior' in routing) {
      Object.assign(hit, { tier: routing.tier, expiredCallBehavior: routing.expiredCallBehavior, supportPhone: routing.supportPhone, recordingConsentAudioUrl: routing.recordingConsentAudioUrl })
      // contract D11: the SMS texts too, so the next STOP or HELP on this node sends the new text.
      if (routing.smsTexts) Object.assign(hit, routing.smsTexts)
      this.#upsert(hit)
    }
    void this.#reload(routing.id).catch(() => {})
  }

  /**
   * A change made through this node: applied here at once, announced to the other nodes; resolves
   * once the announcement is on the bus (answer the change after that).
   */
  changedHere(routing: TenantChange | { id: string }): Promise<void> {
    this.changed(routing)
    return this.#hub ? emitTenantChange(this.#hub, routing.id) : Promise.resolve()
  }

  /** Suspends or reinstates a tenant (the operator's path, see sql/tenants.ts setTenantStatus), on every node. */
  async setStatus(id: string, status: TenantStatus): Promise<boolean> {
    const found = await setTenantStatus(this.#db, id, status)
    if (found) {
      await this.changedHere({ id })
      await this.get(id)
    }
    return found
  }

  #reload(id: string): Promise<TenantInfo | null> {
    const gen = (this.#gen.get(id) ?? 0) + 1
    this.#gen.set(id, gen)
    this.#epoch++
    const p = (async () => {
      const [state, creds] = await Promise.all([getTenantState(this.#db, id), liveCredentialsOf(this.#db, id)])
      // Changed again while we read: the newer reload decides (or has decided already).
      if (this.#gen.get(id) !== gen) return this.#reloading.get(id) ?? this.#tenants.get(id) ?? null
      if (!state) { this.#drop(id); return null }
      const info = this.#put(toInfo(state))
      this.#setKeys(id, creds)
      return info
    })().finally(() => {
      if (this.#reloading.get(id) === p) this.#reloading.delete(id)
    })
    this.#reloading.set(id, p)
    return p
  }

  #put(info: TenantInfo): TenantInfo {
    const prev = this.#tenants.get(info.id)
    if (prev) Object.assign(prev, info) // sessions hold the same object: routing sees the change at once
    else this.#tenants.set(info.id, info)
    const cur = prev ?? info
    this.#upsert(cur)
    return cur
  }

  #drop(id: string): void {
    this.#tenants.delete(id)
    this.#setKeys(id, [])
  }

  #setKeys(tenantId: string, creds: readonly ApiCredential[]): void {
    for (const k of this.#keysOf.get(tenantId) ?? []) this.#keys.delete(k)
    this.#keysOf.delete(tenantId)
    for (const c of creds) this.#addKey(c)
  }

  #addKey(c: ApiCredential): void {
    const k = keyOf(c.keyHash)
    this.#keys.set(k, c)
    let set = this.#keysOf.get(c.tenantId)
    if (!set) this.#keysOf.set(c.tenantId, set = new Set())
    set.add(k)
  }
}
