// The proxy number pool in Postgres: seeding from NUMBER_POOL (contract D1) and loading it for the
// engine's allocator.
import { sql } from 'slonik'
import { guard } from './errors.js'
import type { Db } from './transaction.js'

/** contract D1: 100 fictional US numbers. */
export const DEFAULT_NUMBER_POOL = 'US:+12025550100-+12025550199'

/** A range larger than this is a typo, not a pool. */
const MAX_RANGE = 100_000

const E164 = /^\+[1-9]\d{6,14}$/
const REGION = /^[A-Z][A-Z0-9_-]{0,15}$/

export interface PoolNumber {
  region: string
  number: string
  /** The entry's `@provider` (e.g. 'twilio', or 'twilio+telnyx' for a number both can send
   * from, in order of preference); undefined: the deployment's default provider. */
  provider?: string
}

/** The providers a NUMBER_POOL entry may name after `@`. */
export const POOL_PROVIDERS = ['telnyx', 'twilio'] as const
const PROVIDER = /^[a-z]+(\+[a-z]+)*$/

/**
 * Parses `REGION:+E164-+E164;REGION:+E164@twilio;…` (ranges are inclusive and keep the digit
 * count; `@provider` names the provider of the entry's numbers, `@twilio+telnyx` both in order).
 * Pure; throws an Error naming the bad entry. Duplicates are dropped, first region wins.
 */
export function parseNumberPool(spec: string): PoolNumber[] {
  const out: PoolNumber[] = []
  const seen = new Set<string>()
  const entries = spec.split(';').map(s => s.trim()).filter(Boolean)
  if (entries.length === 0) throw new Error('NUMBER_POOL is empty')
  for (const entry of entries) {
    const colon = entry.indexOf(':')
    if (colon < 1) throw new Error(`NUMBER_POOL entry "${entry}" needs REGION:number`)
    const region = entry.slice(0, colon).trim().toUpperCase()
    if (!REGION.test(region)) throw new Error(`NUMBER_POOL entry "${entry}": bad region`)
    let body = entry.slice(colon + 1).replace(/\s+/g, '')
    const at = body.indexOf('@')
    let provider: string | undefined
    if (at !== -1) {
      provider = body.slice(at + 1).toLowerCase()
      body = body.slice(0, at)
      const names = provider.split('+')
      if (!PROVIDER.test(provider) || names.some(n => !(POOL_PROVIDERS as readonly string[]).includes(n)) || new Set(names).size !== names.length) {
        throw new Error(`NUMBER_POOL entry "${entry}": provider must be ${POOL_PROVIDERS.join(' or ')}, or both joined by +`)
      }
    }
    const dash = body.indexOf('-', 1)
    const first = dash === -1 ? body : body.slice(0, dash)
    const last = dash === -1 ? body : body.slice(dash + 1)
    if (!E164.test(first) || !E164.test(last)) throw new Error(`NUMBER_POOL entry "${entry}": numbers must be E.164`)
    if (first.length !== last.length) throw new Error(`NUMBER_POOL entry "${entry}": range ends differ in length`)
    const from = BigInt(first.slice(1))
    const to = BigInt(last.slice(1))
    if (to < from) throw new Error(`NUMBER_POOL entry "${entry}": range is reversed`)
    if (to - from >= BigInt(MAX_RANGE)) throw new Error(`NUMBER_POOL entry "${entry}": range over ${MAX_RANGE} numbers`)
    for (let n = from; n <= to; n++) {
      const number = `+${n.toString().padStart(first.length - 1, '0')}`
      if (seen.has(number)) continue
      seen.add(number)
      out.push(provider === undefined ? { region, number } : { region, number, provider })
    }
  }
  return out
}

/** Adds the pool's numbers; numbers already present keep their region and holder and take the
 * provider NUMBER_POOL gives them now (`provider`: the default for entries without `@`). Returns
 * how many were new. */
export async function seedNumbers(db: Db, spec: string = DEFAULT_NUMBER_POOL, provider = 'telnyx'): Promise<number> {
  const numbers = parseNumberPool(spec)
  return guard(async () => {
    let added = 0
    for (let i = 0; i < numbers.length; i += 5_000) {
      const chunk = numbers.slice(i, i + 5_000)
      const rows = await db.anyFirst(sql.unsafe`
        INSERT INTO proxy_numbers (number, region, provider)
        SELECT n, r, p FROM unnest(${sql.array(chunk.map(c => c.number), 'text')}, ${sql.array(chunk.map(c => c.region), 'text')},
          ${sql.array(chunk.map(c => c.provider ?? provider), 'text')}) AS u(n, r, p)
        ON CONFLICT (number) DO UPDATE SET provider = EXCLUDED.provider WHERE proxy_numbers.provider <> EXCLUDED.provider
        RETURNING xmax = 0 AS inserted`)
      added += rows.filter(Boolean).length
    }
    return added
  })
}

export interface NumberRow {
  number: string
  region: string
  provider: string
  tenantId: string | null
  lastTenantId: string | null
  /** Epoch ms of the last release (cooldown start); null while held or never used. */
  releasedAt: number | null
  /** The tenant the number is bound to (docs/dual-proxy.md); null: the native pool's. */
  boundTenantId: string | null
}

export async function loadNumbers(db: Db): Promise<NumberRow[]> {
  return guard(async () => {
    const rows = (await db.any(sql.unsafe`
      SELECT number, region, provider, tenant_id, last_tenant_id, released_at, bound_tenant_id FROM proxy_numbers ORDER BY number`)) as readonly {
      number: string; region: string; provider: string; tenant_id: string | null; last_tenant_id: string | null; released_at: number | null
      bound_tenant_id: string | null
    }[]
    return rows.map(r => ({
      number: r.number, region: r.region, provider: r.provider, tenantId: r.tenant_id, lastTenantId: r.last_tenant_id, releasedAt: r.released_at,
      boundTenantId: r.bound_tenant_id,
    }))
  })
}

/** The bindings of these numbers (docs/dual-proxy.md), for a node that may not have heard of one. */
export async function loadNumberBindings(db: Db, numbers: readonly string[]): Promise<Array<{ number: string; boundTenantId: string | null }>> {
  return guard(async () => {
    const rows = (await db.any(sql.unsafe`
      SELECT number, bound_tenant_id FROM proxy_numbers WHERE number = ANY(${sql.array([...numbers], 'text')})`)) as readonly
      { number: string; bound_tenant_id: string | null }[]
    return rows.map(r => ({ number: r.number, boundTenantId: r.bound_tenant_id }))
  })
}
