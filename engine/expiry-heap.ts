// All pending expiries in one binary min-heap: a million sessions cost two array slots each and no
// timer objects. Each item stores its own position, so re-arming (end, patch) and removal are
// O(log n) instead of a search. Keys live in a parallel array of doubles: sifting compares without
// touching the session objects. The key is read only when an item is pushed or updated (by
// default its expiresAt; the engine's is the sooner of that and an inactivity deadline, contract D10).

export interface HeapItem {
  heapPos: number
  expiresAt: number
}

export class ExpiryHeap<T extends HeapItem> {
  readonly #items: T[] = []
  readonly #keys: number[] = []
  readonly #keyOf: (item: T) => number

  constructor(keyOf: (item: T) => number = item => item.expiresAt) {
    this.#keyOf = keyOf
  }

  get size(): number {
    return this.#items.length
  }

  peek(): T | undefined {
    return this.#items[0]
  }

  /** The key of peek(), as last pushed or updated; Infinity when empty. */
  peekKey(): number {
    return this.#keys.length === 0 ? Infinity : this.#keys[0]!
  }

  push(item: T): void {
    item.heapPos = this.#items.length
    this.#items.push(item)
    this.#keys.push(this.#keyOf(item))
    this.#up(item.heapPos)
  }

  remove(item: T): void {
    const i = item.heapPos
    if (i < 0 || this.#items[i] !== item) return
    const last = this.#items.pop() as T
    const lastKey = this.#keys.pop() as number
    item.heapPos = -1
    if (last === item) return
    this.#items[i] = last
    this.#keys[i] = lastKey
    last.heapPos = i
    this.#down(i)
    this.#up(last.heapPos)
  }

  /** After the item's key changed. */
  update(item: T): void {
    const i = item.heapPos
    if (i < 0 || this.#items[i] !== item) return
    const old = this.#keys[i]!
    const key = this.#keyOf(item)
    this.#keys[i] = key
    if (key < old) this.#up(i)
    else this.#down(i)
  }

  #up(i: number): void {
    const items = this.#items
    const keys = this.#keys
    // Indexes below are in bounds by construction (0 <= i < n): `!` costs nothing at run time.
    const item = items[i]!
    const key = keys[i]!
    while (i > 0) {
      const parent = (i - 1) >> 1
      const up = items[parent]!
      if (keys[parent]! <= key) break
      items[i] = up
      keys[i] = keys[parent]!
      up.heapPos = i
      i = parent
    }
    items[i] = item
    keys[i] = key
    item.heapPos = i
  }

  #down(i: number): void {
    const items = this.#items
    const keys = this.#keys
    const n = items.length
    const item = items[i]!
    const key = keys[i]!
    for (;;) {
      let child = 2 * i + 1
      if (child >= n) break
      if (child + 1 < n && keys[child + 1]! < keys[child]!) child++
      if (keys[child]! >= key) break
      const down = items[child]!
      items[i] = down
      keys[i] = keys[child]!
      down.heapPos = i
      i = child
    }
    items[i] = item
    keys[i] = key
    item.heapPos = i
  }
}
