// Live stream events in id order, so that a client's last id is a sound resume cursor
// (`GET /v1/stream?after=<id>`, docs/api.md, "WebSocket stream").
//
// The trap: an event's id is a UUIDv7 minted before its transaction commits (a session command
// mints at its start, a call event at routing and commits with the next record batch). Two events
// of one tenant may commit, and so reach this node, in the other order than their ids. Sent as they
// come, a client could get id 2 then id 1; resuming `after=2` would then skip nothing it lacks, but
// resuming after 1 would send 2 again, and a 1 that commits after the client left is never sent.
//
// The rule: a committed event (this node's own, or another node's from the bus, never anything
// uncommitted) is held until `settleMs` after the time in its id, then released in id order. An
// event that commits within `settleMs` of its id's time is therefore never released after a larger
// id, and the replay of a resume reads only ids older than `now - settleMs` (gateway/stream/resume.ts):
// what is younger comes through here. An event that arrives later than that ("late": a Postgres
// stall, a record batch written after an outage, a bus gap replayed by gateway/replay.ts) cannot be
// placed in order any more: it is released at once and flagged; the sockets already past it get it
// out of order, and a later resume past it is refused with the resync code (gateway/stream/stream.ts). The hold is
// bounded by `settleMs` of this node's clock after arrival, whatever the clock in the id says.
import type { EventEnvelope } from '../../sql/vocabulary/event-envelope.js'

/** The millisecond in a UUIDv7 (its first 48 bits). */
export function idTime(id: string): number {
  return parseInt(id.slice(0, 8) + id.slice(9, 13), 16)
}

interface Held { e: EventEnvelope; dueAt: number }

export interface Settler {
  add(e: EventEnvelope): void
  /** Events held now (tests, metrics). */
  readonly held: number
}

export interface SettlerDeps {
  settleMs: number
  /** Epoch ms, the clock ids are minted with. */
  now: () => number
  /** A released event; `late` when it arrived `settleMs` or more after its id's time. */
  release: (e: EventEnvelope, late: boolean) => void
}

export function createSettler(d: SettlerDeps): Settler {
  // Sorted by id; events mostly come in id order, so an insert looks from the end.
  const queue: Held[] = []
  let timer: NodeJS.Timeout | null = null
  let timerAt = Infinity

  function releaseDue(): void {
    const t = performance.now()
    let n = 0
    while (n < queue.length && queue[n]!.dueAt <= t) n++
    if (n === 0) return
    const out = queue.splice(0, n)
    for (const h of out) d.release(h.e, false)
  }

  function arm(): void {
    const head = queue[0]
    if (!head) return
    if (timer && timerAt <= head.dueAt) return
    if (timer) clearTimeout(timer)
    timerAt = head.dueAt
    timer = setTimeout(() => { timer = null; timerAt = Infinity; releaseDue(); arm() }, Math.max(0, head.dueAt - performance.now()) + 1)
    timer.unref() // never what keeps a stopping process alive
  }

  return {
    add(e) {
      releaseDue() // what is due goes first: a late arrival never overtakes it
      const wait = idTime(e.id) + d.settleMs - d.now()
      if (wait <= 0) {
        // Anything older still held (a clock-capped hold) goes first: id order is kept.
        let n = 0
        while (n < queue.length && queue[n]!.e.id < e.id) n++
        for (const h of queue.splice(0, n)) d.release(h.e, false)
        d.release(e, true)
        return
      }
      const dueAt = performance.now() + Math.min(wait, d.settleMs)
      let i = queue.length
      while (i > 0 && queue[i - 1]!.e.id > e.id) i--
      // A shorter wait than an older event's (clocks of two nodes): it waits for that one too.
      queue.splice(i, 0, { e, dueAt: Math.max(dueAt, i > 0 ? queue[i - 1]!.dueAt : 0) })
      arm()
    },
    get held() { return queue.length },
  }
}
