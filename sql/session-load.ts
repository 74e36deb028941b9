// Reading sessions back with their real numbers, for the engine's memory: at boot (every live
// session) and for one session whose record is not in memory. Numbers are decrypted here and go
// nowhere but the engine.
import pg from 'pg'
import { sql, type DatabasePool } from 'slonik'
import { ALL_CHANNELS, type E164, type SessionId, type SessionRecord, type TenantId, type TenantRouting } from '../engine/types.js'
import { callsJoin } from './call-count.js'
import { isUuid } from './cursor.js'
import { guard, StoreError, toStoreError } from './errors.js'
import type { Db } from './transaction.js'
import { LiveDecoder, type LiveExtra, type OnBatch, type SessionCipher } from './session-copy.js'

export type { LiveExtra, SessionCipher }

const RECORD_COLUMNS = sql.fragment`
  id, tenant_id, proxy_number, state, direction_mode, grace_period_minutes, max_duration_minutes, recording_enabled,
  consent_prompt, agent_phone_enc, customer_phone_enc, created_at, activated_at, expires_at, ended_at, expired_at, version,
  channels, inactivity_timeout_minutes, customer_proxy_number`

interface RecordRow {
  id: string; tenant_id: string; proxy_number: string; state: SessionRecord['state']; direction_mode: SessionRecord['directionMode']
  grace_period_minutes: number; max_duration_minutes: number; recording_enabled: boolean; consent_prompt: SessionRecord['consentPrompt']
  agent_phone_enc: Buffer; customer_phone_enc: Buffer; created_at: number; activated_at: number; expires_at: number
  ended_at: number | null; expired_at: number | null; version: number
  channels: number; inactivity_timeout_minutes: number | null; customer_proxy_number: string | null
}

function toRecord(r: RecordRow, cipher: SessionCipher): SessionRecord {
  return {
    id: r.id as SessionId,
    tenantId: r.tenant_id as TenantId,
    proxyNumber: r.proxy_number as E164,
    ...(r.customer_proxy_number !== null ? { customerProxyNumber: r.customer_proxy_number as E164 } : {}),
    state: r.state,
    directionMode: r.direction_mode,
    gracePeriodMinutes: r.grace_period_minutes,
    maxDurationMinutes: r.max_duration_minutes,
    recordingEnabled: r.recording_enabled,
    consentPrompt: r.consent_prompt,
    agentPhone: cipher.decrypt(r.agent_phone_enc) as E164,
    customerPhone: cipher.decrypt(r.customer_phone_enc) as E164,
    createdAt: r.created_at,
    activatedAt: r.activated_at,
    expiresAt: r.expires_at,
    endedAt: r.ended_at,
    expiredAt: r.expired_at,
    version: r.version,
    // contract D10: present when not the default, as the engine's records (both channels, no timeout).
    ...(r.channels !== ALL_CHANNELS ? { channels: r.channels } : {}),
    ...(r.inactivity_timeout_minutes !== null ? { inactivityTimeoutMinutes: r.inactivity_timeout_minutes } : {}),
  }
}

/** The full record of one session (any state), numbers decrypted; null when unknown. */
export async function getSessionRecord(db: Db, id: string, cipher: SessionCipher): Promise<SessionRecord | null> {
  if (!isUuid(id)) return null
  return guard(async () => {
    const row = (await db.maybeOne(sql.unsafe`SELECT ${RECORD_COLUMNS} FROM sessions WHERE id = ${id}`)) as RecordRow | null
    return row && toRecord(row, cipher)
  })
}

/** A session's record with what its API view adds (metadata as jsonb text, call counters). */
export interface SessionState {
  rec: SessionRecord
  extras: LiveExtra
}

/** getSessionRecord plus the view's extras: what a node loads to answer reads from memory. */
export async function getLiveSessionState(db: Db, id: string, cipher: SessionCipher): Promise<SessionState | null> {
  if (!isUuid(id)) return null
  return guard(async () => {
    const row = (await db.maybeOne(sql.unsafe`
      SELECT ${RECORD_COLUMNS}, metadata::text AS metadata_json, calls.call_count, calls.last_call_at FROM sessions ${callsJoin()} WHERE id = ${id}`,
    )) as (RecordRow & { metadata_json: string; call_count: number; last_call_at: number | null }) | null
    return row && { rec: toRecord(row, cipher), extras: { metadataJson: row.metadata_json, callCount: row.call_count, lastCallAt: row.last_call_at } }
  })
}


/** callsJoin of the boot's `s` as text (no parameters in it), for the COPY's own text. */
const CALLS_JOIN = callsJoin(sql.fragment`s`).sql

// Boot reads every live session with COPY … TO STDOUT (FORMAT binary), on a connection of its own
// beside the pool (slonik has no COPY; pg hands each CopyData message to the active query object,
// which is all a COPY needs):
// - the table read in order of its pages (TID ranges) within one snapshot, instead of keyset
//   pages of 10,000 whose plans cost Postgres ~150 s at a million sessions;
// - binary tuples decoded in place: no row objects, type parsers or promise per row; timestamps
//   are int64 µs since 2000, text comes as its bytes;
// - the two numbers of a batch decrypted in one call of the cipher's bulk path;
// - callCount / lastCallAt counted from the session's call records, one index-only probe per row
//   (migration 011).
// Memory stays bounded: tuples are decoded as pg hands them over (the socket is read no faster),
// and only a batch at a time exists as records. Batches are small (1,024) so records die young:
// a batch of 8,192 lived through scavenges, and copying it cost ~1.5 s of GC at a million.
/**
 * The boot's SELECT of the live sessions on pages [fromPage, toPage) (exported for its plan test).
 * The state is filtered outside an OFFSET 0 subquery, so the scan of sessions has only the page
 * range to use: Postgres cannot match a partial live-state index (without statistics, as on
 * PGlite, it took a scan of a whole partial index for each range), while the call counters keep
 * their index probe (a planner setting against the first had turned the second into a scan of
 * call_records per session).
 */
export const liveSelect = (fromPage: number, toPage: number | null) => `
  SELECT id::text, tenant_id::text, proxy_number, state, direction_mode, grace_period_minutes, max_duration_minutes,
         recording_enabled, consent_prompt, agent_phone_enc, customer_phone_enc, created_at, activated_at, expires_at,
         ended_at, expired_at, version, metadata::text, calls.call_count, calls.last_call_at, channels, inactivity_timeout_minutes,
         customer_proxy_number
  FROM (SELECT * FROM sessions WHERE ctid >= '(${fromPage},0)'::tid${toPage === null ? '' : ` AND ctid < '(${toPage},0)'::tid`} OFFSET 0) s
  ${CALLS_JOIN}
  WHERE s.state IN ('PENDING','ACTIVE','GRACE_PERIOD')`
const liveCopy = (fromPage: number, toPage: number | null) => `COPY (${liveSelect(fromPage, toPage)}) TO STDOUT (FORMAT binary)`
/**
 * Table pages per COPY (32 MB, ~100,000 sessions), each a TID range scan (Postgres 14+), all in one REPEATABLE
 * READ snapshot. One COPY would do for Postgres, but the embedded server runs a statement to its
 * end synchronously, so a single COPY of a million sessions sat whole (~300 MB) in its socket
 * before the first byte was read.
 */
const CHUNK_PAGES = 4_096
/** No byte from Postgres for this long, while we wait for one, fails the boot (a hung server). */
const STALL_MS = 60_000


/**
 * Boot: every PENDING/ACTIVE/GRACE_PERIOD session, numbers decrypted, once each, in batches of
 * `batchSize` (the last one smaller) with each record's view extras at the same position.
 * Batches are handed over in order, one at a time (an async onBatch holds the next back).
 * Returns the count.
 */
export async function loadLiveSessions(
  db: DatabasePool, cipher: SessionCipher, onBatch: OnBatch, batchSize = 1_024, chunkPages = CHUNK_PAGES,
): Promise<number> {
  const client = new pg.Client({ connectionString: db.configuration.connectionUri, connectionTimeoutMillis: 5_000, keepAlive: true })
  client.on('error', () => {}) // reported to the statement running (handleError); nothing else listens
  try {
    await client.connect()
  } catch (err) {
    throw toStoreError(err)
  }
  const socket = (client as unknown as { connection: { stream: NodeJS.ReadableStream & { destroy(): void } } }).connection.stream
  const decoder = new LiveDecoder(cipher, onBatch, Math.max(1, batchSize), paused => (paused ? socket.pause() : socket.resume()))
  try {
    await guard(() => client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY'))
    const pages = Number((await guard(() => client.query<{ pages: string }>(
      `SELECT pg_relation_size('sessions') / current_setting('block_size')::int8 AS pages`))).rows[0]!.pages)
    // The snapshot is older than the size read: every row it sees is on a page counted. The
    // last range is open anyway.
    for (let from = 0; ; from += chunkPages) {
      const last = from + chunkPages >= pages
      await copyOut(client, liveCopy(from, last ? null : from + chunkPages), decoder)
      if (last) break
    }
    await guard(() => client.query('COMMIT'))
    await decoder.finish()
  } catch (err) {
    decoder.abort()
    socket.destroy() // a COPY may still be running: nothing more of this connection is wanted
    throw err
  }
  await client.end().catch(() => {})
  return decoder.total
}

/** One COPY … TO STDOUT, its CopyData messages handed to the decoder as they arrive. */
async function copyOut(client: pg.Client, text: string, decoder: LiveDecoder): Promise<void> {
  let lastData = Date.now()
  let stalled: NodeJS.Timeout | undefined
  try {
    await new Promise<void>((resolve, reject) => {
      stalled = setInterval(() => {
        if (!decoder.holding && Date.now() - lastData > STALL_MS) reject(new StoreError('unavailable', 'boot-load-stalled'))
      }, 1_000)
      stalled.unref()
      decoder.onFailure = reject
      let failed = false
      void client.query({
        submit(connection: { query(text: string): void }) { connection.query(text) },
        handleCopyData(msg: { chunk: Buffer }) {
          lastData = Date.now()
          if (!failed) decoder.push(msg.chunk)
        },
        handleError(err: unknown) { failed = true; reject(toStoreError(err)) },
        handleReadyForQuery() {
          if (failed) return
          try {
            decoder.endCopy()
            resolve()
          } catch (err) {
            reject(err)
          }
        },
        handleCommandComplete() {},
        handleRowDescription() {},
        handleDataRow() {},
        handleEmptyQuery() {},
        handlePortalSuspended() {},
        handleCopyInResponse() {},
      } as unknown as pg.QueryConfig)
    })
  } finally {
    clearInterval(stalled)
  }
}

/** About how many sessions are live (the tenants' counters): a size hint for the boot, no more. */
export async function countLiveSessions(db: Db): Promise<number> {
  return guard(async () => Number(await db.oneFirst(sql.unsafe`SELECT coalesce(sum(live_sessions), 0)::int8 FROM tenants`)))
}

/** What the engine needs of every tenant to route. */
export async function loadTenantsRouting(db: Db): Promise<TenantRouting[]> {
  return guard(async () => {
    const rows = (await db.any(sql.unsafe`
      SELECT id, tier, expired_call_behavior, support_phone, recording_consent_audio_url FROM tenants ORDER BY id`)) as readonly {
      id: string; tier: TenantRouting['tier']; expired_call_behavior: TenantRouting['expiredCallBehavior']
      support_phone: string | null; recording_consent_audio_url: string | null
    }[]
    return rows.map(r => ({
      id: r.id as TenantId,
      tier: r.tier,
      expiredCallBehavior: r.expired_call_behavior,
      supportPhone: r.support_phone as E164 | null,
      recordingConsentAudioUrl: r.recording_consent_audio_url,
    }))
  })
}

/** getLiveSessionState of many sessions in one statement (docs/scaling.md: the reconciliation sweep); unknown ids are left out. */
export async function getLiveSessionStates(db: Db, ids: readonly string[], cipher: SessionCipher): Promise<SessionState[]> {
  const valid = ids.filter(isUuid)
  if (valid.length === 0) return []
  return guard(async () => {
    const rows = (await db.any(sql.unsafe`
      SELECT ${RECORD_COLUMNS}, metadata::text AS metadata_json, calls.call_count, calls.last_call_at FROM sessions ${callsJoin()}
      WHERE id = ANY(${sql.array(valid, 'uuid')})`,
    )) as readonly (RecordRow & { metadata_json: string; call_count: number; last_call_at: number | null })[]
    return rows.map(row => ({ rec: toRecord(row, cipher), extras: { metadataJson: row.metadata_json, callCount: row.call_count, lastCallAt: row.last_call_at } }))
  })
}
