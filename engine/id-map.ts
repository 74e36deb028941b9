// Live sessions by id, as 256 Maps chosen by the id's last two hex digits (random in a UUIDv7).
//
// Why not one Map: a V8 Map grows by rehashing every entry into a table twice the size, in one
// go. At a million sessions that is a stop of 50-250 ms on the main thread (crossing 2^20 entries
// held up every request of a loaded node for ~175 ms: bench/RESULTS.md, "What moved the figures", 647961d), where
// the callback path answers in microseconds. In 256 shards each growth moves 1/256 of the
// entries, and lookups cost two character reads more.

const SHARDS = 256

/** The value of a hex digit (either case); some other small number for any other character. */
function hexValue(c: number): number {
  return (c & 15) + 9 * (c >> 6)
}

/** The shard of an id: its last two hex digits, 0-255. Any string gets some shard. */
export function shardOf(id: string): number {
  const n = id.length
  return ((hexValue(id.charCodeAt(n - 2)) << 4) | hexValue(id.charCodeAt(n - 1))) & (SHARDS - 1)
}

export class IdMap<V> {
  readonly #shards: Array<Map<string, V>> = Array.from({ length: SHARDS }, () => new Map<string, V>())
  #size = 0

  get size(): number {
    return this.#size
  }

  get(id: string): V | undefined {
    return this.#shards[shardOf(id)]!.get(id)
  }

  set(id: string, v: V): void {
    const m = this.#shards[shardOf(id)]!
    const before = m.size
    m.set(id, v)
    this.#size += m.size - before
  }

  delete(id: string): boolean {
    if (!this.#shards[shardOf(id)]!.delete(id)) return false
    this.#size--
    return true
  }

  /** Every value, shard by shard (not in insertion order). */
  * values(): IterableIterator<V> {
    for (const m of this.#shards) yield* m.values()
  }
}
