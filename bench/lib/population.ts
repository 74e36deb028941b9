// The synthetic population the service is loaded with, the same one the baselines route against
// (bench/baselines/route-table.ts): session i binds agentOf(i) and customerOf(i) on
// proxyOf(i % proxies). Tenants own whole proxies (contract D4: one tenant per proxy in use):
// proxy k belongs to tenant k % tenants. Everything is derived from the index, so the request
// generators can target live (proxy, caller) pairs and session ids without a lookup.
import { randomBytes } from 'node:crypto'
import { sql, type DatabasePool } from 'slonik'
import { apiKeyHash, apiSecretMac, newApiKey, newApiSecret } from '../../api/auth/credentials.js'
import { TIER_LIMITS, type E164, type SessionId, type SessionRecord, type TenantId } from '../../engine/types.js'
import { createPartyHasher, createPhoneCipher } from '../../sql/crypto.js'
import { migrate } from '../../sql/migrate.js'
import { openPeriods } from '../../sql/billing.js'
import { bulkInsertSessions, seedNumbers, type BulkSessionRow } from '../../sql/sessions.js'
import { agentOf, customerOf, proxiesFor, proxyOf } from '../baselines/route-table.js'

export { agentOf, customerOf, proxiesFor, proxyOf }

/** Live sessions per tenant stay well under the ENTERPRISE quota, leaving room for scenario 4's creates. */
const SESSIONS_PER_TENANT = Math.floor(TIER_LIMITS.ENTERPRISE.concurrentSessions * 0.4)
/** REST requests one tenant may make in the rate-limit window, with a margin (contract 8.1). */
const REQUESTS_PER_TENANT = Math.floor(TIER_LIMITS.ENTERPRISE.requestsPerMinute * 0.75)
/**
 * Expected REST rate ceiling used to size tenants and API keys, requests per second. Above what
 * the service answers, or the tenants' rate limits (contract 8.1) refuse part of a run: at 25,000, a
 * run without --profile read 40,000 sessions/s, 19 % of them answered 429, and the full tenant
 * windows then refused every create and target swap of the steps after it (bench/RESULTS.md,
 * "What moved the figures", d8843bd).
 */
const REST_RPS_CEILING = 80_000
/** Token exchanges one API key may make per minute (contract 8.4) is 10; keep a margin. */
const EXCHANGES_PER_KEY = 8

const EPOCH = Date.UTC(2026, 0, 1)

export interface Population {
  sessions: number
  proxies: number
  tenants: number
  /** Extra API keys for the token-exchange run (each may exchange 10 times a minute). */
  exchangeKeys: number
}

export function planPopulation(sessions: number, loadSeconds: number): Population {
  const restRequests = REST_RPS_CEILING * (loadSeconds + 3)
  const tenants = Math.max(8, Math.ceil(sessions / SESSIONS_PER_TENANT), Math.ceil(restRequests / REQUESTS_PER_TENANT))
  return { sessions, proxies: proxiesFor(sessions), tenants, exchangeKeys: Math.ceil(restRequests / EXCHANGES_PER_KEY) }
}

export function tenantIdOf(t: number): TenantId {
  return `0190a000-0000-7000-8000-${t.toString(16).padStart(12, '0')}` as TenantId
}

export function tenantOfSession(i: number, p: Population): number {
  return (i % p.proxies) % p.tenants
}

/** UUIDv7 layout (contract D2): time from the index, then the index again, so ids are unique and ordered. */
export function sessionIdOf(i: number): SessionId {
  const ms = (EPOCH + Math.floor(i / 4096)).toString(16).padStart(12, '0')
  const seq = (i % 4096).toString(16).padStart(3, '0')
  const tail = i.toString(16).padStart(15, '0')
  return `${ms.slice(0, 8)}-${ms.slice(8)}-7${seq}-8${tail.slice(0, 3)}-${tail.slice(3)}` as SessionId
}

/** NUMBER_POOL covering proxyOf(0..proxies-1), split in ranges the parser accepts (≤ 100,000 each). */
export function numberPoolFor(p: Population): string {
  const ranges: string[] = []
  for (let k = 0; k < p.proxies; k += 100_000) {
    const last = Math.min(p.proxies, k + 100_000) - 1
    ranges.push(`US:${proxyOf(k, p.proxies)}-${proxyOf(last, p.proxies)}`)
  }
  return ranges.join(';')
}

export interface Credential { tenant: number; apiKey: string; apiSecret: string }

export interface Loaded {
  /** One per tenant: what the REST scenarios exchange for the tenant's token. */
  primary: Credential[]
  /** For the token-exchange run. */
  exchange: Credential[]
  ms: { migrate: number; tenants: number; sessions: number; build: number }
}

/** Writes tenants, numbers and every session through the store's bulk path. */
export async function loadPopulation(pool: DatabasePool, p: Population, phoneKey: Buffer, log: (line: string) => void): Promise<Loaded> {
  let t0 = Date.now()
  await migrate(pool)
  await seedNumbers(pool, numberPoolFor(p))
  const migrateMs = Date.now() - t0

  // Tenants as signup leaves them (tenant, OWNER user, first API key), written in bulk: signup's
  // one transaction per tenant would be most of a smoke run on embedded PGlite.
  t0 = Date.now()
  const salts = Array.from({ length: p.tenants }, () => randomBytes(32))
  const ids = Array.from({ length: p.tenants }, (_, t) => tenantIdOf(t))
  const primary: Credential[] = ids.map((_, t) => ({ tenant: t, apiKey: newApiKey(), apiSecret: newApiSecret() }))
  const exchange: Credential[] = []
  for (let k = 0; k < p.exchangeKeys; k++) exchange.push({ tenant: k % p.tenants, apiKey: newApiKey(), apiSecret: newApiSecret() })
  await pool.transaction(async tx => {
    await tx.query(sql.unsafe`
      INSERT INTO tenants (id, name, salt, tier)
      SELECT id, 'bench tenant ' || n, salt, 'ENTERPRISE'
      FROM unnest(${sql.array(ids, 'uuid')}, ${sql.array(ids.map((_, t) => t), 'int4')}, ${sql.array(salts, 'bytea')}) AS u(id, n, salt)`)
    // Nobody logs in as these users: the hash is a placeholder that matches no password.
    await tx.query(sql.unsafe`
      INSERT INTO users (id, tenant_id, email, password_hash, role)
      SELECT gen_random_uuid(), id, 'bench-' || n || '@example.com', 'bench-no-login', 'OWNER'
      FROM unnest(${sql.array(ids, 'uuid')}, ${sql.array(ids.map((_, t) => t), 'int4')}) AS u(id, n)`)
    const creds = [...primary, ...exchange]
    for (let k = 0; k < creds.length; k += 5_000) {
      const chunk = creds.slice(k, k + 5_000)
      await tx.query(sql.unsafe`
        INSERT INTO api_credentials (id, tenant_id, key_hash, secret_mac)
        SELECT gen_random_uuid(), t, h, m FROM unnest(
          ${sql.array(chunk.map(c => tenantIdOf(c.tenant)), 'uuid')},
          ${sql.array(chunk.map(c => apiKeyHash(c.apiKey)), 'bytea')},
          ${sql.array(chunk.map(c => apiSecretMac(phoneKey, c.apiSecret)), 'bytea')}) AS u(t, h, m)`)
    }
    // This month's billing period of every tenant, as a service whose tenants have been at work
    // finds them (the first usage of a month opens it: sql/billing.ts). Opened by the measured
    // steps instead, the periods would be the warm-up's work and, written after the population's
    // ANALYZE, planned as an empty table (a sequential scan per session create: bench/RESULTS.md,
    // "What moved the figures", 6751e90).
    await openPeriods(tx, ids.map(tenantId => ({ tenantId, at: Date.now() })))
  })
  const tenantsMs = Date.now() - t0

  t0 = Date.now()
  const cipher = createPhoneCipher(phoneKey)
  const hash = createPartyHasher(phoneKey)
  const createdAt = Date.now() - 60_000
  const maxDurationMinutes = 1_440
  const CHUNK = 20_000
  let lastLog = Date.now()
  let buildMs = 0
  const build = (start: number): BulkSessionRow[] => {
    const b0 = Date.now()
    const rows: BulkSessionRow[] = []
    for (let i = start; i < Math.min(p.sessions, start + CHUNK); i++) {
      const t = tenantOfSession(i, p)
      const agentPhone = agentOf(i) as E164
      const customerPhone = customerOf(i) as E164
      const rec: SessionRecord = {
        id: sessionIdOf(i), tenantId: tenantIdOf(t), proxyNumber: proxyOf(i, p.proxies) as E164, state: 'ACTIVE',
        directionMode: 'BIDIRECTIONAL', gracePeriodMinutes: 15, maxDurationMinutes, recordingEnabled: false, consentPrompt: 'DEFAULT',
        agentPhone, customerPhone, createdAt, activatedAt: createdAt, expiresAt: createdAt + maxDurationMinutes * 60_000,
        endedAt: null, expiredAt: null, version: 1,
      }
      rows.push({
        rec, agentHash: hash(salts[t]!, agentPhone), customerHash: hash(salts[t]!, customerPhone),
        agentEnc: cipher.encrypt(agentPhone), customerEnc: cipher.encrypt(customerPhone),
      })
    }
    buildMs += Date.now() - b0
    return rows
  }
  // The next chunk is encrypted and hashed while the database writes the previous one.
  let writing: Promise<number> | null = null
  for (let start = 0; start < p.sessions; start += CHUNK) {
    const rows = build(start)
    await writing
    writing = bulkInsertSessions(pool, rows)
    if (Date.now() - lastLog > 5_000) {
      lastLog = Date.now()
      log(`population: ${start.toLocaleString('en')} / ${p.sessions.toLocaleString('en')} sessions (${Math.round(start / ((Date.now() - t0) / 1000)).toLocaleString('en')}/s)`)
    }
  }
  await writing
  return { primary, exchange, ms: { migrate: migrateMs, tenants: tenantsMs, sessions: Date.now() - t0, build: buildMs } }
}
