// One inbox per key (style 3): messages for a session run one at a time, in arrival order, each to
// completion before the next starts. An inbox exists only while it has work, so a million idle
// sessions cost nothing here. A failing message rejects its own caller only.

export class Mailboxes {
  /** Per busy key: a promise settling when its last queued message has finished (never rejects). */
  readonly #tails = new Map<string, Promise<void>>()

  /** Keys with queued or running work. */
  get size(): number {
    return this.#tails.size
  }

  run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.#tails.get(key)
    const result = prev === undefined ? invoke(fn) : prev.then(fn)
    const tail = result.then(settle, settle)
    this.#tails.set(key, tail)
    void tail.then(() => {
      if (this.#tails.get(key) === tail) this.#tails.delete(key)
    })
    return result
  }
}

function settle(): void {}

/** Runs fn now, turning a synchronous throw into a rejection like the queued path does. */
function invoke<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return Promise.resolve(fn())
  } catch (err) {
    return Promise.reject(err)
  }
}
