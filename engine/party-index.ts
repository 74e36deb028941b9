// The routing index: (proxy, caller) → live session, for every participant of every live session.
//
// Keyed by the real E.164 numbers the engine holds anyway: keying by an HMAC of the caller (as the
// store does) would cost about ten times the lookup on every call. A number is used as its digits,
// a double (at most 15 digits, exact below 2^53), not as a string: the index is one open-addressing
// table over a Float64Array, so a lookup compares numbers in the slot it lands on instead of
// following pointers to key strings. At a million sessions each pointer followed is a cache miss:
// two nested Maps (proxy → Map of callers → session, with key strings to compare at each level)
// measured 2.3 µs median and over 5 µs p99 per route; this table about half that
// (bench/route.bench.ts, bench/RESULTS.md).
//
// Layout: slot i holds keys[2i] = proxy key (negated when the caller is the session's agent, so
// the role needs no string compare) and keys[2i+1] = caller key; 0 marks an empty slot. values[i]
// is the session. Linear probing, deletion by backward shift (no tombstones), capacity a power of
// two grown at 70% load.
//
// Sharded: 256 such tables, the low 8 bits of the hash choosing one and the bits above them the
// slot in it. A table grows by moving every entry at once; one table for a million sessions (two
// million parties) stopped the main thread for 20-250 ms at each growth (bench/route.bench.ts
// create.max, bench/RESULTS.md, "What moved the figures", 647961d), a shard moves 1/256 of that.
import type { LiveSession } from './live-session.js'

const MAX_LOAD = 0.7
const SHARD_BITS = 8
const TWO_32 = 4294967296

/** The digits of an E.164 number as one exact double; 0 for anything else (never a valid key). */
export function e164Key(n: string): number {
  const len = n.length
  // ^\+[1-9]\d{6,14}$ (contract D2)
  if (len < 8 || len > 16 || n.charCodeAt(0) !== 43 || n.charCodeAt(1) === 48) return 0
  let v = 0
  for (let i = 1; i < len; i++) {
    const d = n.charCodeAt(i) - 48
    if (d < 0 || d > 9) return 0
    v = v * 10 + d
  }
  return v
}

function hash(proxyKey: number, callerKey: number): number {
  // murmur3 finalizer over the four 32-bit halves of the two keys.
  let h = Math.imul((proxyKey >>> 0) ^ Math.imul((proxyKey / TWO_32) | 0, 0x27d4eb2f), 0x9e3779b1)
  h ^= callerKey >>> 0
  h = Math.imul(h ^ (h >>> 15), 0x85ebca6b)
  h ^= (callerKey / TWO_32) | 0
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35)
  return (h ^ (h >>> 16)) >>> 0
}

/** One open-addressing table: a shard of the index. */
class Table {
  keys: Float64Array
  values: Array<LiveSession | null>
  mask: number
  size = 0

  constructor(cap: number) {
    this.keys = new Float64Array(2 * cap)
    this.values = new Array<LiveSession | null>(cap).fill(null)
    this.mask = cap - 1
  }
}

export class PartyIndex {
  readonly #tables: Table[]
  readonly #bits: number // log2 of the shard count
  readonly #shardMask: number
  #size = 0

  /** `shards`: a power of two (tests use 1 for long probe runs); `capacity` is spread over them. */
  constructor(capacity = 1024, shards = 1 << SHARD_BITS) {
    let bits = 0
    while ((1 << bits) < shards) bits++
    this.#bits = bits
    this.#shardMask = (1 << bits) - 1
    let cap = 16
    while (cap << bits < capacity) cap *= 2
    this.#tables = Array.from({ length: 1 << bits }, () => new Table(cap))
  }

  get size(): number {
    return this.#size
  }

  /** Slots of the largest shard: what one growth moves at most (tests, diagnosis). */
  get largestTable(): number {
    let most = 0
    for (const t of this.#tables) most = Math.max(most, t.mask + 1)
    return most
  }

  /** The slot of (proxy, caller), or -1: the shard in the low bits, the index in its table above them. */
  find(proxyKey: number, callerKey: number): number {
    if (proxyKey === 0 || callerKey === 0) return -1
    const h = hash(proxyKey, callerKey)
    const shard = h & this.#shardMask
    const t = this.#tables[shard]!
    const keys = t.keys
    const mask = t.mask
    for (let i = (h >>> this.#bits) & mask; ; i = (i + 1) & mask) {
      const p = keys[2 * i]
      if (p === 0) return -1
      if ((p === proxyKey || p === -proxyKey) && keys[2 * i + 1] === callerKey) return (i << this.#bits) | shard
    }
  }

  sessionAt(slot: number): LiveSession {
    return this.#tables[slot & this.#shardMask]!.values[slot >>> this.#bits] as LiveSession
  }

  /** Whether the caller of this slot is its session's agent (party A). */
  isAgentAt(slot: number): boolean {
    return this.#tables[slot & this.#shardMask]!.keys[2 * (slot >>> this.#bits)]! < 0
  }

  get(proxyKey: number, callerKey: number): LiveSession | undefined {
    const slot = this.find(proxyKey, callerKey)
    return slot < 0 ? undefined : this.sessionAt(slot)
  }

  /** Inserts or replaces the entry of (proxy, caller). */
  set(proxyKey: number, callerKey: number, isAgent: boolean, s: LiveSession): void {
    if (proxyKey <= 0 || callerKey <= 0) throw new Error('engine: party index keys must be E.164 numbers')
    const found = this.find(proxyKey, callerKey)
    if (found >= 0) {
      const t = this.#tables[found & this.#shardMask]!
      const i = found >>> this.#bits
      t.keys[2 * i] = isAgent ? -proxyKey : proxyKey
      t.values[i] = s
      return
    }
    const h = hash(proxyKey, callerKey)
    const t = this.#tables[h & this.#shardMask]!
    if ((t.size + 1) > MAX_LOAD * (t.mask + 1)) this.#grow(t, 2 * (t.mask + 1))
    const keys = t.keys
    const mask = t.mask
    let i = (h >>> this.#bits) & mask
    while (keys[2 * i] !== 0) i = (i + 1) & mask
    keys[2 * i] = isAgent ? -proxyKey : proxyKey
    keys[2 * i + 1] = callerKey
    t.values[i] = s
    t.size++
    this.#size++
  }

  /** Removes (proxy, caller) if it maps to s. */
  delete(proxyKey: number, callerKey: number, s: LiveSession): void {
    const slot = this.find(proxyKey, callerKey)
    if (slot < 0) return
    const t = this.#tables[slot & this.#shardMask]!
    let i = slot >>> this.#bits
    if (t.values[i] !== s) return
    const keys = t.keys
    const values = t.values
    const mask = t.mask
    const bits = this.#bits
    // Backward shift: pull later entries of the probe run into the hole unless that would put
    // them before their home slot.
    for (let j = (i + 1) & mask; keys[2 * j] !== 0; j = (j + 1) & mask) {
      const home = (hash(Math.abs(keys[2 * j]!), keys[2 * j + 1]!) >>> bits) & mask
      const stays = i <= j ? i < home && home <= j : i < home || home <= j
      if (stays) continue
      keys[2 * i] = keys[2 * j]!
      keys[2 * i + 1] = keys[2 * j + 1]!
      values[i] = values[j]!
      i = j
    }
    keys[2 * i] = 0
    keys[2 * i + 1] = 0
    values[i] = null
    t.size--
    this.#size--
  }

  /** Room for `entries` without growing (boot: tables of the right size, not a dozen rehashes each). */
  reserve(entries: number): void {
    // Hashing spreads entries evenly; 5 % over the mean is many standard deviations at any size
    // worth reserving for, and a shard that still overflows grows alone.
    const perShard = Math.ceil((entries / this.#tables.length) * 1.05)
    for (const t of this.#tables) {
      let cap = t.mask + 1
      while (perShard > MAX_LOAD * cap) cap *= 2
      if (cap > t.mask + 1) this.#grow(t, cap)
    }
  }

  #grow(t: Table, cap: number): void {
    // Slots are (index << bits | shard) in a 32-bit integer.
    if (cap > 2 ** (31 - this.#bits)) throw new Error('engine: party index full')
    const oldKeys = t.keys
    const oldValues = t.values
    const keys = t.keys = new Float64Array(2 * cap)
    const values = t.values = new Array<LiveSession | null>(cap).fill(null)
    const mask = t.mask = cap - 1
    const bits = this.#bits
    // Keys are unique here: each goes to the first free slot of its probe run, no find() first.
    for (let i = 0; i < oldValues.length; i++) {
      const p = oldKeys[2 * i]!
      if (p === 0) continue
      const c = oldKeys[2 * i + 1]!
      let j = (hash(Math.abs(p), c) >>> bits) & mask
      while (keys[2 * j] !== 0) j = (j + 1) & mask
      keys[2 * j] = p
      keys[2 * j + 1] = c
      values[j] = oldValues[i]!
    }
  }
}
