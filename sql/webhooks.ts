// Webhook storage (contract 4.9, 2.8; contract D6): one config per tenant, the delivery log, and the
// durable outbox the dispatcher claims from. Timestamps go in as ISO strings and come out as
// ISO strings formatted by Postgres, so the result does not depend on the pool's type parsers.
import { hkdfSync } from 'node:crypto'
import { sql, type CommonQueryMethods } from 'slonik'
import type { EventEnvelope } from './vocabulary/event-envelope.js'
import { createPhoneCipher, type PhoneCipher } from './crypto.js'
import { decodeTimeCursor, encodeTimeCursor } from './cursor.js'

const iso = (ms: number): string => new Date(ms).toISOString()

// ---------------------------------------------------------------------------------------------
// Secret encryption. The whsec_ secret has to be recoverable (we sign with it), so it is stored
// AES-256-GCM encrypted (sql/crypto.ts) under its own key, derived from PHONE_KEY with HKDF: a
// webhook secret and a phone number are never encrypted under the same key.

export type SecretCipher = PhoneCipher

export function createSecretCipher(phoneKey: Buffer): SecretCipher {
  return createPhoneCipher(Buffer.from(hkdfSync('sha256', phoneKey, Buffer.alloc(0), 'maskline webhook secret', 32)))
}

// ---------------------------------------------------------------------------------------------
// Config

export interface WebhookConfigRow {
  tenantId: string
  url: string
  events: string[]
  secretEnc: Buffer
  updatedAt: string
}

export async function getWebhookConfig(db: CommonQueryMethods, tenantId: string): Promise<WebhookConfigRow | null> {
  const row = await db.maybeOne(sql.unsafe`
    SELECT tenant_id, url, events, secret_enc, to_char(updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS updated_at
    FROM webhook_configs WHERE tenant_id = ${tenantId}`)
  if (!row) return null
  return {
    tenantId: row.tenant_id as string,
    url: row.url as string,
    events: row.events as string[],
    secretEnc: row.secret_enc as Buffer,
    updatedAt: row.updated_at as string,
  }
}

/** Contract 4.9: registering again overwrites URL, events and secret. */
export async function putWebhookConfig(
  db: CommonQueryMethods,
  c: { tenantId: string; url: string; events: readonly string[]; secretEnc: Buffer; now: number },
): Promise<void> {
  await db.query(sql.unsafe`
    INSERT INTO webhook_configs (tenant_id, url, events, secret_enc, updated_at)
    VALUES (${c.tenantId}, ${c.url}, ${sql.array([...c.events], 'text')}, ${sql.binary(c.secretEnc)}, ${iso(c.now)}::timestamptz)
    ON CONFLICT (tenant_id) DO UPDATE
      SET url = EXCLUDED.url, events = EXCLUDED.events, secret_enc = EXCLUDED.secret_enc, updated_at = EXCLUDED.updated_at`)
}

// ---------------------------------------------------------------------------------------------
// Delivery log (contract 2.8)

export interface DeliveryLogEntry {
  id: string
  event: string
  url: string
  statusCode: number
  success: boolean
  attemptCount: number
  error: string | null
  requestedAt: string
  completedAt: string
}

export interface NewDelivery {
  id: string
  tenantId: string
  eventId: string
  event: string
  url: string
  statusCode: number
  success: boolean
  attemptCount: number
  error: string | null
  requestedAt: number
  completedAt: number
}

export async function insertDelivery(db: CommonQueryMethods, d: NewDelivery): Promise<void> {
  await db.query(sql.unsafe`
    INSERT INTO webhook_deliveries
      (id, tenant_id, event_id, event, url, status_code, success, attempt_count, error, requested_at, completed_at)
    VALUES (${d.id}, ${d.tenantId}, ${d.eventId}, ${d.event}, ${d.url}, ${d.statusCode}, ${d.success},
      ${d.attemptCount}, ${d.error}, ${iso(d.requestedAt)}::timestamptz, ${iso(d.completedAt)}::timestamptz)`)
}

/** The URLs an attempt at this event has already reached (an event with several targets). */
export async function succeededUrls(db: CommonQueryMethods, tenantId: string, eventId: string): Promise<string[]> {
  return [...await db.anyFirst(sql.unsafe`
    SELECT DISTINCT url FROM webhook_deliveries WHERE tenant_id = ${tenantId} AND event_id = ${eventId} AND success`)] as string[]
}

const DELIVERY_COLUMNS = sql.fragment`
  id, event, url, status_code, success, attempt_count, error,
  to_char(requested_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS requested_at,
  to_char(completed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS completed_at`

function toEntry(r: Record<string, unknown>): DeliveryLogEntry {
  return {
    id: r.id as string,
    event: r.event as string,
    url: r.url as string,
    statusCode: Number(r.status_code),
    success: r.success as boolean,
    attemptCount: Number(r.attempt_count),
    error: (r.error as string | null) ?? null,
    requestedAt: r.requested_at as string,
    completedAt: r.completed_at as string,
  }
}

/** Newest first. Returns 'bad-cursor' for an `after` that is neither a cursor nor an ISO time. */
export async function listDeliveries(
  db: CommonQueryMethods,
  q: { tenantId: string; limit: number; after?: string },
): Promise<{ data: DeliveryLogEntry[]; after: string | null } | 'bad-cursor'> {
  let where = sql.fragment`tenant_id = ${q.tenantId}`
  if (q.after !== undefined) {
    // contract D7: `<ISO>_<id>` (sql/cursor.ts) walks every row once even when timestamps tie;
    // a bare ISO timestamp, as contract 4.9 describes `after`, gives the rows strictly older.
    const c = decodeTimeCursor(q.after)
    if (!c) return 'bad-cursor'
    where = c.id
      ? sql.fragment`${where} AND (requested_at, id) < (${iso(c.ms)}::timestamptz, ${c.id}::uuid)`
      : sql.fragment`${where} AND requested_at < ${iso(c.ms)}::timestamptz`
  }
  const rows = await db.any(sql.unsafe`
    SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries
    WHERE ${where}
    ORDER BY requested_at DESC, id DESC
    LIMIT ${q.limit + 1}`)
  const data = rows.slice(0, q.limit).map(toEntry)
  const last = data[data.length - 1]
  return { data, after: rows.length > q.limit && last ? encodeTimeCursor(Date.parse(last.requestedAt), last.id) : null }
}

/** GET /v1/webhooks `recentDeliveries` (contract 8.6: up to 50). */
export async function recentDeliveries(db: CommonQueryMethods, tenantId: string, limit = 50): Promise<DeliveryLogEntry[]> {
  const rows = await db.any(sql.unsafe`
    SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries
    WHERE tenant_id = ${tenantId}
    ORDER BY requested_at DESC, id DESC
    LIMIT ${limit}`)
  return rows.map(toEntry)
}

// ---------------------------------------------------------------------------------------------
// Outbox

export interface OutboxEvent {
  id: string
  tenantId: string
  sessionId: string | null
  type: string
  envelope: EventEnvelope
  /** Attempts so far, this claim included (the claim counts it, so a crash counts too). */
  attempts: number
  /** The lease this claim holds; markDone/markRetry only act while it is still ours. */
  lockedUntil: string
}

/**
 * Leases up to `limit` due events. One statement: the inner SELECT picks rows with
 * `FOR UPDATE SKIP LOCKED` (two nodes claiming at once get disjoint rows, nobody waits), the
 * UPDATE stamps `locked_until` (a lease: nothing is held while the HTTP call runs, and a node
 * killed mid-delivery loses the lease when it expires, so another node redelivers: at least
 * once). An event is not due while an earlier event of its session is still undelivered, so a
 * session's events reach the tenant in order (ids are UUIDv7, so id order is creation order).
 */
export async function claimDue(
  db: CommonQueryMethods,
  opts: { limit: number; leaseMs: number; now: number },
): Promise<OutboxEvent[]> {
  if (opts.limit <= 0) return []
  const now = iso(opts.now)
  const until = iso(opts.now + opts.leaseMs)
  const rows = await db.any(sql.unsafe`
    UPDATE outbox o
    SET locked_until = ${until}::timestamptz, attempts = o.attempts + 1
    FROM (
      SELECT c.id FROM outbox c
      WHERE c.done_at IS NULL
        AND c.next_attempt_at <= ${now}::timestamptz
        AND (c.locked_until IS NULL OR c.locked_until <= ${now}::timestamptz)
        AND NOT EXISTS (
          SELECT 1 FROM outbox p
          WHERE p.session_id = c.session_id AND p.done_at IS NULL AND p.id < c.id)
      ORDER BY c.next_attempt_at, c.id
      LIMIT ${opts.limit}
      FOR UPDATE SKIP LOCKED
    ) due
    WHERE o.id = due.id
    RETURNING o.id, o.tenant_id, o.session_id, o.type, o.envelope, o.attempts,
      to_char(o.locked_until AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS locked_until`)
  return rows
    .map(r => ({
      id: r.id as string,
      tenantId: r.tenant_id as string,
      sessionId: (r.session_id as string | null) ?? null,
      type: r.type as string,
      envelope: (typeof r.envelope === 'string' ? JSON.parse(r.envelope) : r.envelope) as EventEnvelope,
      attempts: Number(r.attempts),
      lockedUntil: r.locked_until as string,
    }))
    .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
}

export type OutboxOutcome = 'delivered' | 'skipped' | 'failed'

/** Finishes an event. False when the lease was lost (another node took the event over). */
export async function markDone(
  db: CommonQueryMethods,
  ev: Pick<OutboxEvent, 'id' | 'lockedUntil'>,
  outcome: OutboxOutcome,
  now: number,
): Promise<boolean> {
  const res = await db.query(sql.unsafe`
    UPDATE outbox SET done_at = ${iso(now)}::timestamptz, outcome = ${outcome}, locked_until = NULL
    WHERE id = ${ev.id} AND done_at IS NULL AND locked_until = ${ev.lockedUntil}::timestamptz`)
  return res.rowCount === 1
}

/** Schedules the next attempt and releases the lease. False when the lease was lost. */
export async function markRetry(
  db: CommonQueryMethods,
  ev: Pick<OutboxEvent, 'id' | 'lockedUntil'>,
  nextAttemptAt: number,
): Promise<boolean> {
  const res = await db.query(sql.unsafe`
    UPDATE outbox SET next_attempt_at = ${iso(nextAttemptAt)}::timestamptz, locked_until = NULL
    WHERE id = ${ev.id} AND done_at IS NULL AND locked_until = ${ev.lockedUntil}::timestamptz`)
  return res.rowCount === 1
}
