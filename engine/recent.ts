// A bounded memory of recent keys (replayed provider callbacks, recently committed calls): two
// generations of max / 2, the older dropped whole when the newer fills, so it always holds at
// least the newest max / 2 keys and never more than max. Not an LRU: evicting the oldest key of
// one Map (`keys().next()` after each delete) walks the deleted slots V8 keeps at the front of the
// table until its next rehash; at 100,000 entries that was 14 % of the service's CPU in the voice
// bench.
//
// With `maxAgeMs` the generations also turn by time: the newer one takes keys for maxAgeMs / 2 at
// most, so under steady traffic a key is kept between maxAgeMs / 2 and maxAgeMs and the memory
// holds about rate × maxAgeMs keys, reached after maxAgeMs, instead of filling to `max` over hours
// (at 30 calls a second a 200,000-key count bound took 110 minutes to fill, and the heap grew all
// that time: docs/memory-bounds.md). The clock is the caller's (the engine reads none).
export interface RecentAge {
  maxAgeMs: number
  now: () => number
}

export class Recent<V> {
  #young = new Map<string, V>()
  #old = new Map<string, V>()
  readonly #half: number
  readonly #age: RecentAge | null
  #youngSince: number

  constructor(max: number, age?: RecentAge) {
    this.#half = Math.max(1, Math.floor(max / 2))
    this.#age = age ?? null
    this.#youngSince = age ? age.now() : 0
  }

  /** Keys held now (both generations; a key set in both counts twice). */
  get size(): number {
    return this.#young.size + this.#old.size
  }

  get(k: string): V | undefined {
    if (this.#age) this.#turnByTime()
    return this.#young.get(k) ?? this.#old.get(k)
  }

  set(k: string, v: V): void {
    if (this.#age) this.#turnByTime()
    if (this.#young.size >= this.#half) this.#turn()
    this.#young.set(k, v)
  }

  #turn(): void {
    this.#old = this.#young
    this.#young = new Map()
    if (this.#age) this.#youngSince = this.#age.now()
  }

  #turnByTime(): void {
    const since = this.#age!.now() - this.#youngSince
    if (since < this.#age!.maxAgeMs / 2) return
    // Idle for a whole maxAgeMs: both generations are too old.
    if (since >= this.#age!.maxAgeMs && this.#old.size + this.#young.size > 0) this.#young = new Map()
    this.#turn()
  }
}
