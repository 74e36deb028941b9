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
import type { LiveSession } from './live-session.js'

const MAX_LOAD = 0.7
const TWO_32 = 4294967296

/** The digits of an E.164 number as one exact double; 0 for anything else (never a valid key). */
export function e164Key(n: string): number {
  const len = n.length
  // ^\+[1-9]\d{6,14}$ (DECISIONS 2)
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

export class PartyIndex {
  #keys: Float64Array
  #values: Array<LiveSession | null>
  #mask: number
  #size = 0

  constructor(capacity = 1024) {
    let cap = 16
    while (cap < capacity) cap *= 2
    this.#keys = new Float64Array(2 * cap)
    this.#values = new Array<LiveSession | null>(cap).fill(null)
    this.#mask = cap - 1
  }

  get size(): number {
    return this.#size
  }

  /** The slot of (proxy, caller), or -1. */
  find(proxyKey: number, callerKey: number): number {
    if (proxyKey === 0 || callerKey === 0) return -1
    const keys = this.#keys
    const mask = this.#mask
    for (let i = hash(proxyKey, callerKey) & mask; ; i = (i + 1) & mask) {
      const p = keys[2 * i]
      if (p === 0) return -1
      if ((p === proxyKey || p === -proxyKey) && keys[2 * i + 1] === callerKey) return i
    }
  }

  sessionAt(slot: number): LiveSession {
    return this.#values[slot] as LiveSession
  }

  /** Whether the caller of this slot is its session's agent (party A). */
  isAgentAt(slot: number): boolean {
    return this.#keys[2 * slot]! < 0
  }

  get(proxyKey: number, callerKey: number): LiveSession | undefined {
    const i = this.find(proxyKey, callerKey)
    return i < 0 ? undefined : (this.#values[i] as LiveSession)
  }

  /** Inserts or replaces the entry of (proxy, caller). */
  set(proxyKey: number, callerKey: number, isAgent: boolean, s: LiveSession): void {
    if (proxyKey <= 0 || callerKey <= 0) throw new Error('engine: party index keys must be E.164 numbers')
    const found = this.find(proxyKey, callerKey)
    if (found >= 0) {
      this.#keys[2 * found] = isAgent ? -proxyKey : proxyKey
      this.#values[found] = s
      return
    }
    if ((this.#size + 1) > MAX_LOAD * (this.#mask + 1)) this.#grow()
    const keys = this.#keys
    const mask = this.#mask
    let i = hash(proxyKey, callerKey) & mask
    while (keys[2 * i] !== 0) i = (i + 1) & mask
    keys[2 * i] = isAgent ? -proxyKey : proxyKey
    keys[2 * i + 1] = callerKey
    this.#values[i] = s
    this.#size++
  }

  /** Removes (proxy, caller) if it maps to s. */
  delete(proxyKey: number, callerKey: number, s: LiveSession): void {
    let i = this.find(proxyKey, callerKey)
    if (i < 0 || this.#values[i] !== s) return
    const keys = this.#keys
    const values = this.#values
    const mask = this.#mask
    // Backward shift: pull later entries of the probe run into the hole unless that would put
    // them before their home slot.
    for (let j = (i + 1) & mask; keys[2 * j] !== 0; j = (j + 1) & mask) {
      const home = hash(Math.abs(keys[2 * j]!), keys[2 * j + 1]!) & mask
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
    this.#size--
  }

  /** Room for `entries` without growing (boot: one table of the right size, not a dozen rehashes). */
  reserve(entries: number): void {
    let cap = this.#mask + 1
    while (entries > MAX_LOAD * cap) cap *= 2
    if (cap > this.#mask + 1) this.#grow(cap)
  }

  #grow(cap = 2 * (this.#mask + 1)): void {
    const oldKeys = this.#keys
    const oldValues = this.#values
    const keys = this.#keys = new Float64Array(2 * cap)
    const values = this.#values = new Array<LiveSession | null>(cap).fill(null)
    const mask = this.#mask = cap - 1
    // Keys are unique here: each goes to the first free slot of its probe run, no find() first
    // (a million-session boot grows the table a dozen times).
    for (let i = 0; i < oldValues.length; i++) {
      const p = oldKeys[2 * i]!
      if (p === 0) continue
      const c = oldKeys[2 * i + 1]!
      let j = hash(Math.abs(p), c) & mask
      while (keys[2 * j] !== 0) j = (j + 1) & mask
      keys[2 * j] = p
      keys[2 * j + 1] = c
      values[j] = oldValues[i]!
    }
  }
}
