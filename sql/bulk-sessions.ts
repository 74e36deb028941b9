// The bulk path for the benchmarks (1M sessions): sessions, their participant rows and the live
// counters of tenants and proxies, written a chunk at a time with INSERT … SELECT FROM unnest(…),
// one array parameter per column, several chunks at once on a pool. Each chunk is one
// transaction, counters included, so the counters always equal what committed. It trusts its
// input: the quota is not checked, and a participant overlap or an unknown tenant or proxy fails
// that chunk (the latter checked here: sessions have no foreign keys since migration 012).
import { sql, type CommonQueryMethods } from 'slonik'
import { ALL_CHANNELS, LIVE_STATES, type SessionRecord } from '../engine/types.js'
import { StoreError } from './errors.js'
import { iso, transact, type Db } from './transaction.js'

export interface BulkSessionRow {
  rec: SessionRecord
  agentHash: string
  customerHash: string
  agentEnc: Buffer
  customerEnc: Buffer
  metadata?: Record<string, unknown>
}

const CHUNK = 5_000

/**
 * Returns how many sessions were written. `parallel` chunks run at once when `db` is a pool
 * (index maintenance, not the wire, is the cost, so a second backend helps).
 */
export async function bulkInsertSessions(db: Db, rows: readonly BulkSessionRow[], opts: { chunkSize?: number; parallel?: number } = {}): Promise<number> {
  const size = opts.chunkSize ?? CHUNK
  const parallel = 'connect' in db ? Math.max(1, opts.parallel ?? 4) : 1
  let next = 0
  let written = 0
  const worker = async () => {
    while (next < rows.length) {
      const chunk = rows.slice(next, next + size)
      next += size
      const n = await transact(db, tx => insertChunk(tx, chunk))
      written += n // not `written += await …`: that reads `written` before the await
    }
  }
  await Promise.all(Array.from({ length: parallel }, worker))
  return written
}

async function insertChunk(tx: CommonQueryMethods, chunk: readonly BulkSessionRow[]): Promise<number> {
  const col = <T>(f: (r: BulkSessionRow) => T) => chunk.map(f)
  const text = (f: (r: BulkSessionRow) => string) => sql.array(col(f), 'text')
  const stamp = (f: (r: BulkSessionRow) => number | null) => sql.array(col(r => { const v = f(r); return v === null ? null : iso(v) }), 'timestamptz')
  const int = (f: (r: BulkSessionRow) => number) => sql.array(col(f), 'int4')
  const missing = (await tx.oneFirst(sql.unsafe`
    SELECT (SELECT count(*) FROM (SELECT DISTINCT t FROM unnest(${sql.array(col(r => r.rec.tenantId), 'uuid')}) AS t) u
             WHERE NOT EXISTS (SELECT 1 FROM tenants WHERE id = u.t))
         + (SELECT count(*) FROM (SELECT DISTINCT p FROM unnest(${text(r => r.rec.proxyNumber)}) AS p) u
             WHERE NOT EXISTS (SELECT 1 FROM proxy_numbers WHERE number = u.p))`)) as number
  if (missing > 0) throw new StoreError('not-found', '23503', 'sessions: unknown tenant or proxy number')
  await tx.query(sql.unsafe`
    INSERT INTO sessions (id, tenant_id, proxy_number, state, direction_mode, metadata, grace_period_minutes,
                          max_duration_minutes, recording_enabled, consent_prompt, agent_phone_enc, customer_phone_enc,
                          agent_hash, customer_hash, expires_at, created_at, activated_at, ended_at, expired_at, version,
                          channels, inactivity_timeout_minutes)
    SELECT * FROM unnest(
      ${sql.array(col(r => r.rec.id), 'uuid')}, ${sql.array(col(r => r.rec.tenantId), 'uuid')}, ${text(r => r.rec.proxyNumber)},
      ${text(r => r.rec.state)}, ${text(r => r.rec.directionMode)}, ${sql.array(col(r => JSON.stringify(r.metadata ?? {})), 'jsonb')},
      ${int(r => r.rec.gracePeriodMinutes)}, ${int(r => r.rec.maxDurationMinutes)}, ${sql.array(col(r => r.rec.recordingEnabled), 'bool')},
      ${text(r => r.rec.consentPrompt)}, ${sql.array(col(r => r.agentEnc), 'bytea')}, ${sql.array(col(r => r.customerEnc), 'bytea')},
      ${text(r => r.agentHash)}, ${text(r => r.customerHash)}, ${stamp(r => r.rec.expiresAt)}, ${stamp(r => r.rec.createdAt)},
      ${stamp(r => r.rec.activatedAt)}, ${stamp(r => r.rec.endedAt)}, ${stamp(r => r.rec.expiredAt)}, ${int(r => r.rec.version)},
      ${sql.array(col(r => r.rec.channels ?? ALL_CHANNELS), 'int2')}, ${sql.array(col(r => r.rec.inactivityTimeoutMinutes ?? null), 'int4')})`)

  const live = chunk.filter(r => LIVE_STATES.includes(r.rec.state))
  if (live.length > 0) {
    const ids = live.flatMap(r => [r.rec.id, r.rec.id])
    const proxies = live.flatMap(r => [r.rec.proxyNumber, r.rec.proxyNumber])
    const hashes = live.flatMap(r => [r.agentHash, r.customerHash])
    await tx.query(sql.unsafe`
      INSERT INTO session_participants (proxy_number, party_hash, session_id)
      SELECT * FROM unnest(${sql.array(proxies, 'text')}, ${sql.array(hashes, 'text')}, ${sql.array(ids, 'uuid')})`)
    // Counter rows are locked last and in one order (tenants by id, then proxies by number), the
    // order createSession and releaseSessions take them in: parallel chunks (and the creates and
    // expiries running meanwhile) queue for them briefly, never deadlock.
    // NO KEY UPDATE (what the UPDATEs take anyway) leaves the key-share locks of the other chunks'
    // foreign-key checks alone; FOR UPDATE would deadlock against them.
    const tenants = sql.array(live.map(r => r.rec.tenantId), 'uuid')
    const proxyNumbers = sql.array(live.map(r => r.rec.proxyNumber), 'text')
    await tx.query(sql.unsafe`SELECT 1 FROM tenants WHERE id = ANY(${tenants}) ORDER BY id FOR NO KEY UPDATE`)
    await tx.query(sql.unsafe`
      UPDATE tenants SET live_sessions = live_sessions + c.n
      FROM (SELECT t, count(*)::int AS n FROM unnest(${tenants}) AS t GROUP BY t) c
      WHERE tenants.id = c.t`)
    // contract D4: one tenant per proxy in use; the proxy is held by the tenant of its sessions.
    await tx.query(sql.unsafe`SELECT 1 FROM proxy_numbers WHERE number = ANY(${proxyNumbers}) ORDER BY number FOR NO KEY UPDATE`)
    await tx.query(sql.unsafe`
      UPDATE proxy_numbers SET live_sessions = live_sessions + c.n, tenant_id = c.t, last_tenant_id = c.t, released_at = NULL
      FROM (SELECT p, min(t::text)::uuid AS t, count(*)::int AS n
            FROM unnest(${proxyNumbers}, ${tenants}) AS u(p, t) GROUP BY p) c
      WHERE proxy_numbers.number = c.p`)
  }
  return chunk.length
}
