// WebSocket upgrades decided after an await (a token or tenant this node has not seen yet), done
// where uWS 20.30 cannot drop them.
//
// The bug: uWS's HttpResponse::cork() runs its callback, then looks at the socket it corked. When
// the callback upgraded that socket to a WebSocket, the socket keeps its address (the WebSocket's
// per-socket data is smaller than the HTTP response's, and the realloc that swaps them shrinks in
// place: 296 → 200 bytes measured here), so cork() takes it for the HTTP response still and
// reads that response's state from bytes that now belong to the WebSocket or to the allocator.
// When they happen to read "connection: close, response sent", it shuts the new socket down: the
// client gets its 101, then a FIN and no close frame; the close handler sees 1006 with no
// reason. About one handshake in several hundred under the test suite's load; `strace -k` showed
// the shutdown() inside res.cork(), in the promise reaction of a token verification. uWS.js's own
// example for an async upgrade is exactly `res.cork(() => res.upgrade(...))`.
//
// The way around it: while another socket is corked, `res.cork(cb)` runs `cb` without corking
// `res` (uWS corks one socket at a time), so there is no epilogue to go wrong, and uWS.js still
// counts the writes as corked (no "writes must be made from within a corked callback" warning;
// the 101 goes out in several small writes instead of one). The other socket: a GET this node
// sends itself, on a path nobody else knows; its response, corked, performs every upgrade waiting
// and then answers. Not from inside that GET's handler: uWS is parsing HTTP there, and an upgrade
// while it parses is taken for an upgrade of the socket being parsed (uWS aborts the process:
// "Cork buffer must not be held across event loop iterations"); one turn later (setImmediate).
// One request in flight at a time serves everything queued meanwhile. A handshake decided
// synchronously (a cached token of a tenant in memory: the usual case) is upgraded in uWS's
// upgrade callback itself, where uWS has its socket corked, and never waits.
import http from 'node:http'
import { randomBytes } from 'node:crypto'
import type { TemplatedApp } from 'uWebSockets.js'

/** How long the request to itself may take before the waiting handshakes are refused (503). */
const DRAIN_TIMEOUT_MS = 2_000

export interface DeferredUpgrades {
  /**
   * Runs `upgrade` from inside uWS's callback for the drain request; `unavailable` instead when
   * that request cannot be made or fails (the listener is closing). One of the two, once.
   */
  defer(upgrade: () => void, unavailable: () => void): void
  /** Upgrades performed through the drain request since start (tests, diagnostics). */
  count(): number
  close(): void
}

/** `selfUrl`: this listener's own base URL once it is bound (null before). */
export function deferredUpgrades(app: TemplatedApp, selfUrl: () => string | null): DeferredUpgrades {
  const path = `/_maskline/stream-upgrades/${randomBytes(16).toString('hex')}`
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
  let waiting: Array<{ upgrade: () => void; unavailable: () => void }> = []
  let inFlight = false
  let done = 0

  app.get(path, res => {
    let aborted = false
    res.onAborted(() => { aborted = true })
    setImmediate(() => {
      if (aborted) return // the request fails on its side: the waiting are refused there
      res.cork(() => {
        const batch = waiting
        waiting = []
        for (const w of batch) w.upgrade()
        done += batch.length
        res.end()
      })
    })
  })

  function failAll(): void {
    const batch = waiting
    waiting = []
    for (const w of batch) w.unavailable()
  }

  function kick(): void {
    if (inFlight || waiting.length === 0) return
    const base = selfUrl()
    if (base === null) return failAll()
    inFlight = true
    let settled = false
    const settle = (ok: boolean) => {
      if (settled) return
      settled = true
      inFlight = false
      if (!ok) failAll()
      kick() // upgrades that arrived after the handler ran
    }
    const req = http.get(base + path, { agent, timeout: DRAIN_TIMEOUT_MS }, r => {
      r.resume()
      r.on('end', () => settle(r.statusCode === 200))
      r.on('error', () => settle(false))
    })
    req.on('timeout', () => req.destroy(new Error('drain request timed out')))
    req.on('error', () => settle(false))
  }

  return {
    defer(upgrade, unavailable) {
      waiting.push({ upgrade, unavailable })
      kick()
    },
    count: () => done,
    close() {
      failAll()
      agent.destroy()
    },
  }
}
