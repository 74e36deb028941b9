// Finding a session by its parties' hashes: the sticky proxy of a create, and GET /v1/sessions/verify.
import { sql } from 'slonik'
import { guard } from './errors.js'
import { ts, type Db } from './transaction.js'
import { LIVE } from './session-common.js'

/**
 * stickyProxy (contract D10): the proxy of the newest session this agent and customer had with the
 * tenant created at or after `since`; null when none. One probe of sessions_pair_recent (008).
 */
export async function findStickyProxy(db: Db, q: { tenantId: string; agentHash: string; customerHash: string; since: number }): Promise<string | null> {
  return guard(async () => (await db.maybeOneFirst(sql.unsafe`
    SELECT proxy_number FROM sessions
    WHERE customer_hash = ${q.customerHash} AND agent_hash = ${q.agentHash} AND created_at >= ${ts(q.since)}
      AND tenant_id = ${q.tenantId}
    ORDER BY created_at DESC LIMIT 1`)) as string | null)
}

/** GET /v1/sessions/verify: the newest ACTIVE or GRACE_PERIOD session the party takes part in. */
export async function findLiveByPartyHash(db: Db, tenantId: string, hash: string): Promise<{ id: string; proxyNumber: string; metadata: Record<string, unknown> } | null> {
  return guard(async () => {
    const row = (await db.maybeOne(sql.unsafe`
      SELECT id, CASE WHEN agent_hash = ${hash} THEN proxy_number ELSE COALESCE(customer_proxy_number, proxy_number) END AS proxy_number, metadata
      FROM sessions -- the party's own proxy (docs/dual-proxy.md)
      WHERE tenant_id = ${tenantId} AND (agent_hash = ${hash} OR customer_hash = ${hash})
        AND state IN ${LIVE} AND state <> 'PENDING'
      ORDER BY created_at DESC, id DESC
      LIMIT 1`)) as { id: string; proxy_number: string; metadata: Record<string, unknown> } | null
    return row && { id: row.id, proxyNumber: row.proxy_number, metadata: row.metadata }
  })
}
