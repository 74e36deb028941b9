// Fixtures of the store tests: tenants and numbers inserted directly (sql/tenants.ts belongs to
// another module), session records shaped like the engine's, fictional numbers (contract D2).
import { randomBytes } from 'node:crypto'
import { sql, type CommonQueryMethods, type DatabasePool } from 'slonik'
import { buildEnvelope, type EventEnvelope } from '../../sql/vocabulary/event-envelope.js'
import { uuidv7 } from '../../sql/vocabulary/ids.js'
import type { E164, SessionId, SessionRecord, TenantId, Tier } from '../../engine/types.js'
import { createPartyHasher, createPhoneCipher } from '../../sql/crypto.js'
import { createSession, seedNumbers } from '../../sql/sessions.js'
import type { CreateSessionArgs } from '../../sql/sessions.js'

export const MINUTE = 60_000
export const T0 = Date.UTC(2026, 0, 15, 12, 0, 0) // mid-month, so periods are unambiguous

export const phoneKey = randomBytes(32)
export const cipher = createPhoneCipher(phoneKey)
export const hashParty = createPartyHasher(phoneKey)

/** +1 202 555 01xx proxies (the default pool); parties from +1 416 555 xxxx. */
export const proxy = (n: number) => `+1202555${String(100 + n).padStart(4, '0')}` as E164
export const party = (n: number) => `+1416555${String(n).padStart(4, '0')}` as E164

export interface TenantFixture {
  id: TenantId
  salt: Buffer
}

export async function addTenant(db: CommonQueryMethods, tier: Tier = 'STARTER'): Promise<TenantFixture> {
  const id = uuidv7() as TenantId
  const salt = randomBytes(32)
  await db.query(sql.unsafe`
    INSERT INTO tenants (id, name, tier, salt) VALUES (${id}, ${`tenant ${id}`}, ${tier}, ${sql.binary(salt)})`)
  return { id, salt }
}

export async function addNumbers(db: CommonQueryMethods, count = 100): Promise<void> {
  await seedNumbers(db, `US:${proxy(0)}-${proxy(count - 1)}`)
}

export function record(tenant: TenantFixture, o: { proxy: E164; agent: E164; customer: E164; at?: number; id?: string; state?: SessionRecord['state'] }): SessionRecord {
  const at = o.at ?? T0
  return {
    id: (o.id ?? uuidv7(at)) as SessionId,
    tenantId: tenant.id,
    proxyNumber: o.proxy,
    state: o.state ?? 'ACTIVE',
    directionMode: 'BIDIRECTIONAL',
    gracePeriodMinutes: 15,
    maxDurationMinutes: 120,
    recordingEnabled: false,
    consentPrompt: 'DEFAULT',
    agentPhone: o.agent,
    customerPhone: o.customer,
    createdAt: at,
    activatedAt: at,
    expiresAt: at + 120 * MINUTE,
    endedAt: null,
    expiredAt: null,
    version: 1,
  }
}

export function envelope(rec: SessionRecord, type: EventEnvelope['type'], at = rec.createdAt): EventEnvelope {
  return buildEnvelope(uuidv7(at), type, at, { sessionId: rec.id, tenantId: rec.tenantId, proxyNumber: rec.proxyNumber, state: rec.state })
}

export function createArgs(tenant: TenantFixture, rec: SessionRecord, quota = 100, extra: Partial<CreateSessionArgs> = {}): CreateSessionArgs {
  return {
    rec,
    metadata: { orderId: 'o-1' },
    agentHash: hashParty(tenant.salt, rec.agentPhone),
    customerHash: hashParty(tenant.salt, rec.customerPhone),
    agentEnc: cipher.encrypt(rec.agentPhone),
    customerEnc: cipher.encrypt(rec.customerPhone),
    quota,
    events: [envelope(rec, 'session.created'), envelope(rec, 'session.activated')],
    ...extra,
  }
}

/** Numbers, a tenant and one live session on proxy(n), agent party(n) and customer party(n + 1). */
export async function liveSession(db: DatabasePool, n: number): Promise<{ tenant: TenantFixture; rec: SessionRecord }> {
  await addNumbers(db)
  const tenant = await addTenant(db)
  const rec = record(tenant, { proxy: proxy(n), agent: party(n), customer: party(n + 1) })
  const created = await createSession(db, createArgs(tenant, rec))
  if (created !== 'ok') throw new Error(`liveSession: the create answered ${String(created)}`)
  return { tenant, rec }
}

export async function count(db: CommonQueryMethods, table: string, where = sql.fragment`TRUE`): Promise<number> {
  return (await db.oneFirst(sql.unsafe`SELECT count(*) FROM ${sql.identifier([table])} WHERE ${where}`)) as number
}
