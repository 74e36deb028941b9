// Reading sessions back with their real numbers, for the engine's memory: at boot (every live
// session) and for one session whose record is not in memory. Numbers are decrypted here and go
// nowhere but the engine.
import pg from 'pg'
import { sql, type DatabasePool } from 'slonik'
import { ALL_CHANNELS, type E164, type SessionId, type SessionRecord, type TenantId, type TenantRouting } from '../engine/types.js'
import type { SessionExtras } from '../engine/index.js'
import { callsJoin } from './call-count.js'
import { isUuid } from './cursor.js'
import { guard, StoreError, toStoreError } from './errors.js'
import type { Db } from './transaction.js'

export interface SessionCipher {
  decrypt(buf: Buffer): string
  /** Many at once, as decrypt() each (sql/crypto.ts: the boot's bulk path). */
  decryptPacked?(packed: Buffer, ends: ArrayLike<number>, count: number): string[]
}

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

/** What a live session's API view holds besides its record (reads answered from
 * memory): metadata::text (the jsonb's own text, its key order, not parsed), the call counters. */
export type LiveExtra = SessionExtras

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
const FIELDS = 23
const SIGNATURE = Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1')
const HEADER_BYTES = SIGNATURE.length + 8 // then flags (int32) and the extension's length (int32)
/** 2000-01-01T00:00:00Z, the zero of binary timestamps. */
const PG_EPOCH_MS = 946_684_800_000
const EMPTY_JSON = '{}'
/** No byte from Postgres for this long, while we wait for one, fails the boot (a hung server). */
const STALL_MS = 60_000

type OnBatch = (recs: SessionRecord[], extras: LiveExtra[]) => void | Promise<void>

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

/** Binary COPY tuples → records and extras, a batch at a time. */
class LiveDecoder {
  total = 0
  onFailure: (err: unknown) => void = () => {}
  readonly #cipher: SessionCipher
  readonly #onBatch: OnBatch
  readonly #batchSize: number
  readonly #pause: (paused: boolean) => void
  #pending: Buffer | null = null
  #header = false
  #trailer = false
  #failed = false
  #error: unknown = null
  readonly #at = new Int32Array(FIELDS) // each field's offset in the tuple being decoded (-1: NULL)
  readonly #len = new Int32Array(FIELDS)
  // The batch being built: records wait for their numbers, decrypted together at flush.
  #recs: SessionRecord[] = []
  #extras: LiveExtra[] = []
  #packed = Buffer.allocUnsafe(64 * 1024)
  #ends: number[] = []
  #used = 0
  // Batches handed to onBatch and not yet done: one at a time, in order.
  #queue: Promise<void> = Promise.resolve()
  #inFlight = 0

  constructor(cipher: SessionCipher, onBatch: OnBatch, batchSize: number, pause: (paused: boolean) => void) {
    this.#cipher = cipher
    this.#onBatch = onBatch
    this.#batchSize = batchSize
    this.#pause = pause
  }

  /** Whether we hold Postgres back (an onBatch still running), so its silence is ours. */
  get holding(): boolean {
    return this.#inFlight > 1
  }

  push(chunk: Buffer): void {
    try {
      let buf = chunk
      if (this.#pending !== null) {
        buf = Buffer.concat([this.#pending, chunk])
        this.#pending = null
      }
      let off = 0
      if (!this.#header) {
        off = this.#readHeader(buf)
        if (off < 0) { this.#pending = Buffer.from(buf); return }
      }
      while (off < buf.length && !this.#trailer) {
        const next = this.#readTuple(buf, off)
        if (next < 0) break
        off = next
      }
      // pg reuses its buffer after this call: what is left over is copied.
      if (off < buf.length && !this.#trailer) this.#pending = Buffer.from(buf.subarray(off))
    } catch (err) {
      this.#fail(err)
    }
  }

  /** After a COPY's last message: it ended with its trailer; the next one starts with a header. */
  endCopy(): void {
    if (this.#failed) throw this.#error
    if (!this.#trailer || this.#pending !== null) throw new StoreError('internal', 'boot-load-truncated')
    this.#header = false
    this.#trailer = false
  }

  /** After the last COPY: the last batch, then every batch done. */
  async finish(): Promise<void> {
    this.#flush()
    await this.#queue
    if (this.#failed) throw this.#error
  }

  abort(): void {
    this.#failed = true
  }

  #fail(err: unknown): void {
    if (this.#failed) return
    this.#failed = true
    this.#error = err
    this.onFailure(err)
  }

  #readHeader(buf: Buffer): number {
    if (buf.length < HEADER_BYTES) return -1
    if (!buf.subarray(0, SIGNATURE.length).equals(SIGNATURE)) throw new StoreError('internal', 'boot-load-format')
    const end = HEADER_BYTES + buf.readInt32BE(SIGNATURE.length + 4)
    if (buf.length < end) return -1
    this.#header = true
    return end
  }

  /** Decodes the tuple at off; returns where the next one starts, or -1 if it is not all here. */
  #readTuple(buf: Buffer, off: number): number {
    if (off + 2 > buf.length) return -1
    const n = buf.readInt16BE(off)
    if (n === -1) { this.#trailer = true; return off + 2 }
    if (n !== FIELDS) throw new StoreError('internal', 'boot-load-format')
    const at = this.#at
    const len = this.#len
    let p = off + 2
    for (let f = 0; f < FIELDS; f++) {
      if (p + 4 > buf.length) return -1
      const l = buf.readInt32BE(p)
      p += 4
      at[f] = l < 0 ? -1 : p
      len[f] = l
      if (l > 0) p += l
      if (p > buf.length) return -1
    }
    this.#add(buf)
    return p
  }

  #add(b: Buffer): void {
    const at = this.#at
    const len = this.#len
    this.#pack(b, at[9]!, len[9]!)
    this.#pack(b, at[10]!, len[10]!)
    const rec: SessionRecord = {
      id: (b as unknown as Slicing).latin1Slice(at[0]!, at[0]! + len[0]!) as SessionId, // uuid text: ASCII
      tenantId: (b as unknown as Slicing).latin1Slice(at[1]!, at[1]! + len[1]!) as TenantId,
      proxyNumber: (b as unknown as Slicing).utf8Slice(at[2]!, at[2]! + len[2]!) as E164,
      state: known(b, at[3]!, len[3]!) as SessionRecord['state'],
      directionMode: known(b, at[4]!, len[4]!) as SessionRecord['directionMode'],
      gracePeriodMinutes: int(b, at[5]!, len[5]!),
      maxDurationMinutes: int(b, at[6]!, len[6]!),
      recordingEnabled: b[at[7]!] === 1,
      consentPrompt: known(b, at[8]!, len[8]!) as SessionRecord['consentPrompt'],
      agentPhone: '' as E164, // decrypted with the batch
      customerPhone: '' as E164,
      createdAt: stamp(b, at[11]!) as number,
      activatedAt: stamp(b, at[12]!) as number,
      expiresAt: stamp(b, at[13]!) as number,
      endedAt: stamp(b, at[14]!),
      expiredAt: stamp(b, at[15]!),
      version: int(b, at[16]!, len[16]!),
    }
    // contract D10: set only when not the default (both channels, no timeout), as the engine's records.
    const channels = int(b, at[20]!, len[20]!)
    if (channels !== ALL_CHANNELS) rec.channels = channels
    if (at[21]! >= 0) rec.inactivityTimeoutMinutes = int(b, at[21]!, len[21]!)
    // docs/dual-proxy.md: the customer's own proxy, NULL (absent) for native sessions.
    if (at[22]! >= 0) rec.customerProxyNumber = (b as unknown as Slicing).utf8Slice(at[22]!, at[22]! + len[22]!) as E164
    this.#recs.push(rec)
    const m = at[17]!
    this.#extras.push({
      metadataJson: len[17] === 2 && b[m] === 0x7b && b[m + 1] === 0x7d ? EMPTY_JSON : (b as unknown as Slicing).utf8Slice(m, m + len[17]!),
      callCount: int(b, at[18]!, len[18]!),
      lastCallAt: stamp(b, at[19]!),
    })
    if (this.#recs.length >= this.#batchSize) this.#flush()
  }

  /** Copies a ciphertext into the batch's packed buffer. */
  #pack(b: Buffer, at: number, len: number): void {
    if (at < 0) throw new StoreError('internal', 'boot-load-format')
    if (this.#used + len > this.#packed.length) {
      const bigger = Buffer.allocUnsafe(Math.max(2 * this.#packed.length, this.#used + len))
      this.#packed.copy(bigger, 0, 0, this.#used)
      this.#packed = bigger
    }
    b.copy(this.#packed, this.#used, at, at + len)
    this.#used += len
    this.#ends.push(this.#used)
  }

  #flush(): void {
    const recs = this.#recs
    const extras = this.#extras
    if (recs.length === 0 || this.#failed) return
    const n = this.#ends.length
    const cipher = this.#cipher
    const numbers = cipher.decryptPacked
      ? cipher.decryptPacked(this.#packed, this.#ends, n)
      : this.#ends.map((end, i) => cipher.decrypt(this.#packed.subarray(i === 0 ? 0 : this.#ends[i - 1], end)))
    for (let i = 0; i < recs.length; i++) {
      const r = recs[i]!
      r.agentPhone = numbers[2 * i] as E164
      r.customerPhone = numbers[2 * i + 1] as E164
    }
    this.#recs = []
    this.#extras = []
    this.#ends = []
    this.#used = 0
    this.total += recs.length
    // In order, one at a time; a second batch waiting pauses the socket until the first is done.
    if (++this.#inFlight > 1) this.#pause(true)
    this.#queue = this.#queue.then(async () => {
      if (!this.#failed) await this.#onBatch(recs, extras)
      if (--this.#inFlight === 1) this.#pause(false)
    })
    this.#queue.catch(err => this.#fail(err))
  }
}

/** Buffer's own slicers: toString(encoding, …) dispatches on the encoding per call first. */
interface Slicing { latin1Slice(start: number, end: number): string; utf8Slice(start: number, end: number): string }

/** The enum values (states, direction modes, consent prompts) as shared strings, not one per row. */
const KNOWN = ['ACTIVE', 'PENDING', 'GRACE_PERIOD', 'BIDIRECTIONAL', 'A_TO_B_ONLY', 'B_TO_A_ONLY', 'DEFAULT', 'CUSTOM', 'NONE']
  .map(value => ({ value, bytes: Buffer.from(value, 'latin1') }))

function known(b: Buffer, at: number, len: number): string {
  for (const k of KNOWN) {
    if (k.bytes.length !== len) continue
    let j = 0
    while (j < len && b[at + j] === k.bytes[j]) j++
    if (j === len) return k.value
  }
  return (b as unknown as Slicing).utf8Slice(at, at + len) // the CHECK constraints leave no other value; the engine would refuse it
}

function int(b: Buffer, at: number, len: number): number {
  if (len === 4) return b.readInt32BE(at)
  if (len === 2) return b.readInt16BE(at)
  if (len === 8) return Number(b.readBigInt64BE(at))
  throw new StoreError('internal', 'boot-load-format')
}

/** A binary timestamptz (int64 µs since 2000) as epoch ms, sub-millisecond digits dropped as the text parser does. */
function stamp(b: Buffer, at: number): number | null {
  if (at < 0) return null
  const hi = b.readInt32BE(at)
  const lo = b.readUInt32BE(at + 4)
  if (hi === 0x7fffffff && lo === 0xffffffff) return Number.POSITIVE_INFINITY
  if (hi === -0x80000000 && lo === 0) return Number.NEGATIVE_INFINITY
  const us = hi * 4_294_967_296 + lo // exact: |µs| < 2^53 for ±285 years around 2000
  const rem = ((us % 1_000) + 1_000) % 1_000
  return (us - rem) / 1_000 + PG_EPOCH_MS
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
