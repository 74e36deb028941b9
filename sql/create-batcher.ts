// Natural batching of session creates. A create that finds a free slot goes to the
// database at once, alone; creates that arrive while the slots are taken wait, and the next free
// slot takes all of them (up to a batch's limit) as one batch. Nothing waits for a timer: an idle
// service sends every create alone, as before, and a busy one pays a create's fixed Postgres cost
// (statement, plan, commit: bench/pg-create.bench.ts --batch) once per batch instead of once per
// create. A batch is all or nothing; when it cannot be written as a whole, each of its creates runs
// alone, and that answer (ok, or the exact refusal) is the one its caller gets.

export interface BatchRunner<A, R> {
  /** One create alone: its own answer, or its own error. */
  one(a: A): Promise<R>
  /** Several at once: true when every one was written (their answer is `written`), false when none was. */
  many(batch: readonly A[]): Promise<boolean>
  /** The answer of a create written by a batch. */
  written: R
}

interface Waiting<A, R> {
  a: A
  resolve(r: R): void
  reject(err: unknown): void
}

/** Since start, for the metrics (gateway/metrics.ts): how creates reached the database. */
export interface BatchStats {
  /** Creates run alone: those that found the slot free, and each of an undone batch. */
  alone: number
  /** Batch statements that wrote their creates, and the creates they wrote. */
  batches: number
  batched: number
  /** Batch statements that wrote nothing (a refusal inside, or an error): their creates ran alone. */
  undone: number
}

export class CreateBatcher<A, R> {
  readonly stats: BatchStats = { alone: 0, batches: 0, batched: 0, undone: 0 }
  private readonly queue: Waiting<A, R>[] = []
  private running = 0
  private readonly runner: BatchRunner<A, R>
  private readonly slots: number
  private readonly maxBatch: number

  /**
   * `slots`: statements of creates at the database at once (each alone or a batch); `maxBatch`: the
   * most creates in one batch.
   */
  constructor(runner: BatchRunner<A, R>, slots: number, maxBatch: number) {
    this.runner = runner
    this.slots = slots
    this.maxBatch = maxBatch
  }

  submit(a: A): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.queue.push({ a, resolve, reject })
      this.pump()
    })
  }

  private pump(): void {
    while (this.running < this.slots && this.queue.length > 0) {
      const batch = this.queue.splice(0, this.maxBatch)
      this.running++
      void this.run(batch).finally(() => {
        this.running--
        this.pump()
      })
    }
  }

  private async run(batch: Waiting<A, R>[]): Promise<void> {
    if (batch.length > 1) {
      // Any failure of the batch, the connection's included, leaves each create to its own run,
      // which retries or reports as a create alone does.
      const written = await this.runner.many(batch.map(w => w.a)).catch(() => false)
      if (written) {
        this.stats.batches++
        this.stats.batched += batch.length
        for (const w of batch) w.resolve(this.runner.written)
        return
      }
      this.stats.undone++
    }
    this.stats.alone += batch.length
    await Promise.all(batch.map(w => this.runner.one(w.a).then(w.resolve, w.reject)))
  }
}
