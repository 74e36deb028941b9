// The boot's binary COPY decoder (sql/session-load.ts reads; this decodes): PGCOPY tuples of the
// live-session SELECT (`liveSelect`, its 23 columns in order) into engine records and their view
// extras, a batch at a time, the batch's two numbers per session decrypted in one bulk call.
// Decoded in place: no row objects, type parsers or promise per row; timestamps are int64 µs
// since 2000, text comes as its bytes (why ours: docs/libraries.md).
import { ALL_CHANNELS, type E164, type SessionId, type SessionRecord, type TenantId } from '../engine/types.js'
import type { SessionExtras } from '../engine/index.js'
import { StoreError } from './errors.js'

/** Decrypts a session's numbers (sql/crypto.ts); the boot's bulk path when it has one. */
export interface SessionCipher {
  decrypt(buf: Buffer): string
  /** Many at once, as decrypt() each (sql/crypto.ts: the boot's bulk path). */
  decryptPacked?(packed: Buffer, ends: ArrayLike<number>, count: number): string[]
}

/** What a live session's API view holds besides its record (reads answered from memory). */
export type LiveExtra = SessionExtras

const FIELDS = 23
const SIGNATURE = Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1')
const HEADER_BYTES = SIGNATURE.length + 8 // then flags (int32) and the extension's length (int32)
/** 2000-01-01T00:00:00Z, the zero of binary timestamps. */
const PG_EPOCH_MS = 946_684_800_000
const EMPTY_JSON = '{}'

export type OnBatch = (recs: SessionRecord[], extras: LiveExtra[]) => void | Promise<void>

/** Binary COPY tuples → records and extras, a batch at a time. */
export class LiveDecoder {
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
