// A pinned create (docs/dual-proxy.md): the session's numbers are named by the caller, the agent
// on proxyNumber and the customer on customerProxyNumber (the same number: a native session). Not
// the native create's hot statement: a short transaction taking the locks in the order every
// writer of these counters keeps (the tenant row, then the proxy rows by number, then the
// participant keys: sql/session-expiry.ts releaseSessions), so it cannot deadlock with creates,
// ends or expiry sweeps of any node.
import { sql, type SerializableValue } from 'slonik'
import type { CreateSessionArgs } from './session-create.js'
import { ALL_CHANNELS } from '../engine/types.js'
import { finishUsage, numberRentalKey, usageCtes, usageOutcome, usageRows, type UsageInput, type UsageOutcome } from './billing.js'
import { guard, withRetry } from './errors.js'
import { outboxInsert } from './outbox.js'
import { rollback, transact, ts, tsOrNull, type Db } from './transaction.js'

/** What a native create writes, less its Idempotency-Key and known price. */
export type PinnedCreateArgs = Pick<CreateSessionArgs, 'rec' | 'metadata' | 'agentHash' | 'customerHash' | 'agentEnc' | 'customerEnc' | 'quota' | 'events'> & {
  /** The caller's own writes, last in the same transaction (a retry runs them again): committed with the session, or not at all. */
  within?: ((tx: Db) => Promise<void>) | undefined
}

/**
 * 'proxy-unavailable': a number is neither bound to the tenant nor held by it (or held by another);
 * 'proxy-in-use': a party is already live on its number (session_participants' primary key,
 * which also settles two creates racing for one (proxy, party): the second waits for the first
 * and finds its row). Every refusal writes nothing.
 */
export type PinnedCreateResult = 'ok' | 'tier-session-limit' | 'proxy-unavailable' | 'proxy-in-use'

export async function createPinnedSession(db: Db, a: PinnedCreateArgs): Promise<PinnedCreateResult> {
  const { rec } = a
  const agentProxy = rec.proxyNumber
  const customerProxy = rec.customerProxyNumber ?? rec.proxyNumber
  const numbers = [...new Set<string>([agentProxy, customerProxy])].sort()
  return guard(() => withRetry(() => transact<PinnedCreateResult>(db, async tx => {
    const quota = await tx.maybeOneFirst(sql.unsafe`
      UPDATE tenants SET live_sessions = live_sessions + 1 WHERE id = ${rec.tenantId} AND live_sessions < ${a.quota} RETURNING 1`)
    if (quota === null) return rollback('tier-session-limit')
    // Bound to the tenant (and not held by another), or held by the tenant's live sessions and
    // bound to nobody: checked on the rows locked (in number order), so a concurrent bind or
    // release is seen, and held in the same statement when every one is usable.
    const held = await tx.oneFirst(sql.unsafe`
      WITH p AS (
        SELECT number, bound_tenant_id, tenant_id, live_sessions FROM proxy_numbers
        WHERE number = ANY(${sql.array(numbers, 'text')}) ORDER BY number FOR NO KEY UPDATE),
      usable AS (
        SELECT count(*) FILTER (WHERE (p.bound_tenant_id = ${rec.tenantId} AND (p.tenant_id IS NULL OR p.tenant_id = ${rec.tenantId}))
           OR (p.bound_tenant_id IS NULL AND p.tenant_id = ${rec.tenantId} AND p.live_sessions > 0)) = ${numbers.length} AS ok FROM p),
      hold AS (
        UPDATE proxy_numbers n SET tenant_id = ${rec.tenantId}, last_tenant_id = ${rec.tenantId}, live_sessions = n.live_sessions + 1, released_at = NULL
        FROM usable WHERE usable.ok AND n.number = ANY(${sql.array(numbers, 'text')}) RETURNING 1)
      SELECT count(*)::int FROM hold`)
    if (held !== numbers.length) return rollback('proxy-unavailable')
    // As a native create: session_created, and the day's number_rental of each number it holds.
    const usage: UsageInput[] = [
      { tenantId: rec.tenantId, metric: 'session_created', quantity: 1, at: rec.createdAt, sessionId: rec.id },
      ...numbers.map(n => ({
        tenantId: rec.tenantId, metric: 'number_rental' as const, quantity: 1, at: rec.createdAt,
        dedupeKey: numberRentalKey(rec.tenantId, n, rec.createdAt), metadata: { proxyNumber: n },
      })),
    ]
    const rows = usageRows(usage)
    // The session, its participants, its events and its usage in one statement.
    const { parts, ...outcome } = await tx.one(sql.unsafe`
      WITH s AS (
        INSERT INTO sessions (id, tenant_id, proxy_number, customer_proxy_number, state, direction_mode, metadata, grace_period_minutes,
                              max_duration_minutes, recording_enabled, consent_prompt, agent_phone_enc, customer_phone_enc,
                              agent_hash, customer_hash, expires_at, created_at, activated_at, ended_at, expired_at, version,
                              channels, inactivity_timeout_minutes)
        VALUES (${rec.id}, ${rec.tenantId}, ${agentProxy}, ${rec.customerProxyNumber ?? null}, ${rec.state}, ${rec.directionMode},
                ${sql.jsonb(a.metadata as SerializableValue)}, ${rec.gracePeriodMinutes}, ${rec.maxDurationMinutes}, ${rec.recordingEnabled},
                ${rec.consentPrompt}, ${sql.binary(a.agentEnc)}, ${sql.binary(a.customerEnc)}, ${a.agentHash}, ${a.customerHash},
                ${ts(rec.expiresAt)}, ${ts(rec.createdAt)}, ${ts(rec.activatedAt)}, ${tsOrNull(rec.endedAt)}, ${tsOrNull(rec.expiredAt)},
                ${rec.version}, ${rec.channels ?? ALL_CHANNELS}, ${rec.inactivityTimeoutMinutes ?? null})
        RETURNING id),
      ins AS (
        INSERT INTO session_participants (proxy_number, party_hash, session_id)
        SELECT v.proxy_number, v.party_hash, s.id FROM s, (VALUES (${agentProxy}::text, ${a.agentHash}::text), (${customerProxy}::text, ${a.customerHash}::text)) v (proxy_number, party_hash)
        ON CONFLICT DO NOTHING RETURNING 1)
      ${a.events.length > 0 ? sql.fragment`, events AS (${outboxInsert(a.events, rec.id)})` : sql.fragment``},
      ${usageCtes(rows)}
      SELECT (SELECT count(*)::int FROM ins) AS parts, ${usageOutcome}`) as unknown as UsageOutcome & { parts: number }
    if (parts !== 2) return rollback('proxy-in-use')
    await finishUsage(tx, usage, rows, outcome)
    await a.within?.(tx)
    return 'ok'
  })))
}
