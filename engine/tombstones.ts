// The last version of sessions that recently left memory. EXPIRED and FAILED are final, so a live
// version of such a session that arrives late (a plan committed after tick() expired it, a sync
// message overtaken by a newer one) is stale and must not bring it back. Kept for a bounded time,
// measured on the engine's own tick clock.

export class Tombstones {
  readonly #versions = new Map<string, number>()
  #ids: string[] = []
  #versionsAt: number[] = []
  #stampedAt: number[] = []
  #head = 0

  readonly ttlMs: number
  constructor(ttlMs: number) {
    this.ttlMs = ttlMs
  }

  get size(): number {
    return this.#versions.size
  }

  add(id: string, version: number, now: number): void {
    const held = this.#versions.get(id)
    if (held !== undefined && held >= version) return
    this.#versions.set(id, version)
    this.#ids.push(id)
    this.#versionsAt.push(version)
    this.#stampedAt.push(now)
  }

  /** True when a record of this version is not newer than the session's final version. */
  covers(id: string, version: number): boolean {
    const v = this.#versions.get(id)
    return v !== undefined && version <= v
  }

  prune(now: number): void {
    let h = this.#head
    const ids = this.#ids
    while (h < ids.length && this.#stampedAt[h]! + this.ttlMs <= now) {
      const id = ids[h]!
      if (this.#versions.get(id) === this.#versionsAt[h]) this.#versions.delete(id)
      h++
    }
    if (h > 1024 && h * 2 > ids.length) {
      this.#ids = ids.slice(h)
      this.#versionsAt = this.#versionsAt.slice(h)
      this.#stampedAt = this.#stampedAt.slice(h)
      h = 0
    }
    this.#head = h
  }
}
