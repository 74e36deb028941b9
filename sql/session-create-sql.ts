// The create's one statement (CREATE) and its batched form (create_sessions_batch, migration 015),
// with the parameters both take by name (sql/session-create.ts runs them).
import { sql, type QuerySqlToken } from 'slonik'
import { uuidv7 } from './vocabulary/ids.js'
import { ALL_CHANNELS } from '../engine/types.js'
import { monthStart, numberRentalKey } from './billing.js'
import { sqlStateOf, StoreError } from './errors.js'
import { outboxInsertFrom } from './outbox.js'
import { PREPARE, type DirectPool } from './direct.js'
import { iso, isoOrNull } from './transaction.js'
import type { CreateSessionArgs } from './session-create.js'

type CreateOutcome = 'ok' | 'tier-session-limit' | 'proxy-conflict' | 'no-period'
export interface CreateRow { outcome: CreateOutcome }

/** The two ways the database refuses a create that its snapshot's gates let through (see CREATE). */
export function raceRefusal(err: unknown): boolean {
  const state = sqlStateOf(err)
  return state === '23502' || (err instanceof StoreError && err.slug === 'proxy-conflict')
}

type CreateParam =
  | 'tenant' | 'quota' | 'proxy' | 'id' | 'state' | 'direction' | 'metadata' | 'grace' | 'maxDuration' | 'recording'
  | 'consent' | 'agentEnc' | 'customerEnc' | 'agentHash' | 'customerHash' | 'expiresAt' | 'createdAt' | 'activatedAt'
  | 'endedAt' | 'expiredAt' | 'version' | 'events' | 'periodStart' | 'usageId' | 'priceKnown' | 'price' | 'rentalId'
  | 'rentalKey' | 'rentalMeta' | 'channels' | 'idle'

/** A parameter of CREATE by name: a marker string, replaced by its value at each create. */
const P = (name: CreateParam) => `\u0001${name}`

/**
 * Refusals write nothing, with no transaction to roll back. Read-only gates come first: `clash`
 * (a participant already on this proxy), `hold` (the proxy is free or this tenant's, contract D4,
 * and bound to no tenant: docs/dual-proxy.md)
 * and `period` (the month's billing period is open), as of the statement's snapshot. They gate q
 * (the quota, contract 8.2, across nodes: the tenant row's update, re-checked on its newest version),
 * q gates p (the proxy hold), p gives s its proxy number, s gates the participants, and those the
 * outbox and the usage. What a concurrent transaction committed after the snapshot is still
 * refused by the database, by undoing the whole statement with an error: a proxy another tenant
 * took (or bound) leaves p empty and s's proxy_number NULL (23502, NOT NULL), and a participant another
 * create inserted fails the INSERT into session_participants on its primary key (23505, no ON
 * CONFLICT on purpose). Contract 3.1 and the hold stay decided by the database.
 * Lock order: the tenant row (q), then the proxy row (p waits for q: EXISTS over q gates it), then
 * the participant keys: the order releaseSessions and bulkInsertSessions keep. Each
 * uncorrelated EXISTS is evaluated in full before the node it gates reads a row. (A tenant row
 * locked FOR UPDATE first and updated after, in one statement, deadlocked: the update of a row
 * version newer than the snapshot queues for the tuple lock behind the waiters of its own lock.)
 */
export const CREATE = compile(sql.unsafe`${PREPARE}
  WITH clash AS (
    SELECT 1 FROM session_participants
    WHERE proxy_number = ${P('proxy')}::text AND party_hash IN (${P('agentHash')}::text, ${P('customerHash')}::text) LIMIT 1),
  hold AS (
    SELECT 1 FROM proxy_numbers
    WHERE number = ${P('proxy')}::text AND bound_tenant_id IS NULL AND (tenant_id IS NULL OR tenant_id = ${P('tenant')}::uuid)),
  period AS (
    SELECT id FROM billing_periods WHERE tenant_id = ${P('tenant')}::uuid AND period_start = ${P('periodStart')}::timestamptz),
  q AS (
    UPDATE tenants SET live_sessions = live_sessions + 1
    WHERE id = ${P('tenant')}::uuid AND live_sessions < ${P('quota')}::int
      AND NOT EXISTS (SELECT 1 FROM clash) AND EXISTS (SELECT 1 FROM hold) AND EXISTS (SELECT 1 FROM period)
    RETURNING id),
  p AS (
    UPDATE proxy_numbers
    SET tenant_id = ${P('tenant')}::uuid, last_tenant_id = ${P('tenant')}::uuid, live_sessions = live_sessions + 1, released_at = NULL
    WHERE number = ${P('proxy')}::text AND bound_tenant_id IS NULL AND (tenant_id IS NULL OR tenant_id = ${P('tenant')}::uuid)
      AND EXISTS (SELECT 1 FROM q)
    RETURNING number),
  s AS (
    INSERT INTO sessions (id, tenant_id, proxy_number, state, direction_mode, metadata, grace_period_minutes,
                          max_duration_minutes, recording_enabled, consent_prompt, agent_phone_enc, customer_phone_enc,
                          agent_hash, customer_hash, expires_at, created_at, activated_at, ended_at, expired_at, version,
                          channels, inactivity_timeout_minutes)
    SELECT ${P('id')}::uuid, ${P('tenant')}::uuid, (SELECT number FROM p), ${P('state')}::text, ${P('direction')}::text,
           ${P('metadata')}::jsonb, ${P('grace')}::int, ${P('maxDuration')}::int, ${P('recording')}::boolean, ${P('consent')}::text,
           ${P('agentEnc')}::bytea, ${P('customerEnc')}::bytea, ${P('agentHash')}::text, ${P('customerHash')}::text,
           ${P('expiresAt')}::timestamptz, ${P('createdAt')}::timestamptz, ${P('activatedAt')}::timestamptz,
           ${P('endedAt')}::timestamptz, ${P('expiredAt')}::timestamptz, ${P('version')}::int,
           ${P('channels')}::smallint, ${P('idle')}::int
    WHERE EXISTS (SELECT 1 FROM q)
    RETURNING id),
  parts AS (
    INSERT INTO session_participants (proxy_number, party_hash, session_id)
    SELECT ${P('proxy')}::text, h.hash, s.id FROM s CROSS JOIN (VALUES (${P('agentHash')}::text), (${P('customerHash')}::text)) AS h(hash)
    RETURNING 1),
  outbox_ins AS (${outboxInsertFrom(sql.fragment`
    SELECT x FROM jsonb_array_elements(${P('events')}::jsonb) AS x WHERE EXISTS (SELECT 1 FROM s)`, P('id'), { fresh: true })}),
  usage_ins AS (
    INSERT INTO billing_events (id, tenant_id, billing_period_id, metric, quantity, unit_price, recorded_at,
                                session_id, call_record_id, metadata, dedupe_key)
    SELECT u.id, ${P('tenant')}::uuid, period.id, u.metric, 1,
           CASE WHEN u.known THEN u.price ELSE (
             SELECT pr.unit_price FROM pricing pr JOIN tenants t ON t.tier = pr.tier
             WHERE t.id = ${P('tenant')}::uuid AND pr.metric = u.metric AND pr.effective_from <= ${P('createdAt')}::timestamptz
               AND (pr.effective_until IS NULL OR pr.effective_until > ${P('createdAt')}::timestamptz)
             ORDER BY pr.effective_from DESC LIMIT 1) END,
           ${P('createdAt')}::timestamptz, u.session_id, NULL, u.metadata, u.dedupe_key
    FROM period CROSS JOIN (VALUES
      (${P('usageId')}::uuid, 'session_created', ${P('priceKnown')}::boolean, ${P('price')}::numeric, ${P('id')}::uuid, '{}'::jsonb, NULL::text),
      (${P('rentalId')}::uuid, 'number_rental', false, NULL::numeric, NULL::uuid, ${P('rentalMeta')}::jsonb, ${P('rentalKey')}::text)
    ) AS u(id, metric, known, price, session_id, metadata, dedupe_key)
    WHERE EXISTS (SELECT 1 FROM parts)
    ON CONFLICT (dedupe_key) DO NOTHING)
  -- One text column (pg builds a parser per column of every result). The quota is decided first
  -- (q before p), also when a read-only gate kept q from running.
  SELECT CASE
    WHEN EXISTS (SELECT 1 FROM s) THEN 'ok'
    WHEN EXISTS (SELECT 1 FROM clash) OR NOT EXISTS (SELECT 1 FROM hold) THEN
      CASE WHEN (SELECT live_sessions < ${P('quota')}::int FROM tenants WHERE id = ${P('tenant')}::uuid) THEN 'proxy-conflict' ELSE 'tier-session-limit' END
    WHEN NOT EXISTS (SELECT 1 FROM period) THEN 'no-period'
    WHEN EXISTS (SELECT 1 FROM q) THEN 'proxy-conflict'
    ELSE 'tier-session-limit' END AS outcome`)

/** Named per connection on real Postgres (parsed and planned once); never on the embedded one. */
export const CREATE_NAME = 'ml_create_session_v3'

interface Compiled {
  /** For slonik (a caller's connection, or the keyed path): the token, values set per create. */
  token: QuerySqlToken
  /** For pg: the text with $1… placeholders. */
  text: string
  /** Per placeholder: a parameter of the create, or a constant of the text. */
  slots: readonly (CreateParam | { value: unknown })[]
}

function compile(token: QuerySqlToken): Compiled {
  const slots = token.values.map(v => (typeof v === 'string' && v.startsWith('\u0001') ? (v.slice(1) as CreateParam) : { value: v }))
  return { token, text: token.sql.replaceAll('$slonik_', '$'), slots }
}

/**
 * A create's parameters by name: CREATE's placeholders (createValues) and a row of
 * create_sessions_batch (migration 015, which reads them by these names).
 */
function createParams(a: CreateSessionArgs, bytea: (b: Buffer) => unknown): Record<CreateParam, unknown> {
  const { rec } = a
  return {
    tenant: rec.tenantId, quota: a.quota, proxy: rec.proxyNumber, id: rec.id, state: rec.state, direction: rec.directionMode,
    metadata: a.metadata, grace: rec.gracePeriodMinutes, maxDuration: rec.maxDurationMinutes,
    recording: rec.recordingEnabled, consent: rec.consentPrompt, agentEnc: bytea(a.agentEnc), customerEnc: bytea(a.customerEnc),
    agentHash: a.agentHash, customerHash: a.customerHash, expiresAt: iso(rec.expiresAt), createdAt: iso(rec.createdAt),
    activatedAt: iso(rec.activatedAt), endedAt: isoOrNull(rec.endedAt), expiredAt: isoOrNull(rec.expiredAt), version: rec.version,
    events: a.events, periodStart: iso(monthStart(rec.createdAt)), usageId: uuidv7(),
    priceKnown: a.billing !== undefined, price: a.billing?.unitPrice ?? null, rentalId: uuidv7(),
    rentalKey: numberRentalKey(rec.tenantId, rec.proxyNumber, rec.createdAt), rentalMeta: { proxyNumber: rec.proxyNumber },
    channels: rec.channels ?? ALL_CHANNELS, idle: rec.inactivityTimeoutMinutes ?? null,
  }
}

/** The parameters of CREATE in placeholder order. `pg` takes the bytea as Buffers, slonik as text; jsonb as JSON text. */
export function createValues(a: CreateSessionArgs, buffers: boolean): unknown[] {
  const v = createParams(a, b => (buffers ? b : `\\x${b.toString('hex')}`))
  v.metadata = JSON.stringify(v.metadata)
  v.events = JSON.stringify(v.events)
  v.rentalMeta = JSON.stringify(v.rentalMeta)
  return CREATE.slots.map(s => (typeof s === 'string' ? v[s] : s.value))
}

/**
 * Creates that arrive while an earlier one is at the database go together: one call of
 * create_sessions_batch (migration 015), which takes the batch's row locks in the order every
 * writer keeps and then writes every create of the batch, or nothing.
 */
const CREATE_BATCH = sql.unsafe`${PREPARE}
  SELECT create_sessions_batch(${'batch'}::jsonb, ${'tenants'}::uuid[], ${'proxies'}::text[]) AS outcome`

/**
 * Writes every create of `batch` (true), or nothing (false: each must then run on its own). Any
 * other error is reported where the pool reports its own (a fault of the connection, or of the
 * function, is then seen even though each create goes on alone) and thrown.
 */
export async function createSessionsBatch(direct: DirectPool, batch: readonly CreateSessionArgs[]): Promise<boolean> {
  const rows = JSON.stringify(batch.map(a => {
    const k = a.idempotency
    const row: Record<string, unknown> = createParams(a, b => b.toString('hex'))
    return k ? Object.assign(row, { idemKey: k.key, idemHash: k.requestHash, idemStatus: k.status, idemResponse: k.response }) : row
  }))
  const tenants = [...new Set(batch.map(a => a.rec.tenantId))]
  const proxies = [...new Set<string>(batch.map(a => a.rec.proxyNumber))]
  try {
    const row = (await direct.queries.one({ sql: CREATE_BATCH.sql, values: [rows, tenants, proxies] })) as { outcome: string }
    return row.outcome === 'ok'
  } catch (err) {
    if (BATCH_UNDONE.has(sqlStateOf(err) ?? '')) return false
    direct.report(err)
    throw err
  }
}

/** How a batch fails when one of its creates may not be written (see create_sessions_batch). */
const BATCH_UNDONE = new Set(['23502', '23505', '21000', '40P01', '40001'])
