// The tenant's event stream (GET /v1/stream, a WebSocket) as an async iterator that survives
// disconnections: it reconnects with a jittered exponential backoff and asks the service for what
// it missed with `?after=<id of the last event received>`, so a consumer sees every event once,
// in order, across reconnects. The token goes in the subprotocol pair `bearer, <jwt>` (the one
// way a browser can send it; never in the URL) and is renewed before a reconnect when it is near
// expiry, or at once after the service closed the socket for an expired token (1008).
//
// When the service no longer has the events after that id (older than its replay window, or an
// id it does not know) it closes with 4410 `resync_required`: the iterator yields
// `{ kind: 'resync_required' }` (re-read what you show from the REST API) and continues with live
// events. Until the first event arrives the stream has no position: a reconnect before then
// starts from live again.
import type { BearerSource } from './http.js'
import type { EventEnvelope, EventType } from './types.js'

/** What the stream needs of a WebSocket: the browser's, Node 22's global, or the `ws` package's. */
export interface WebSocketLike {
  onopen: ((ev: unknown) => void) | null
  onmessage: ((ev: { data: unknown }) => void) | null
  onclose: ((ev: { code: number; reason: string }) => void) | null
  onerror: ((ev: unknown) => void) | null
  close(code?: number, reason?: string): void
  /** `ws` only: stop reading from the socket (the service's backpressure then paces the sender). */
  pause?(): void
  resume?(): void
}
export type WebSocketConstructor = new (url: string, protocols: string[]) => WebSocketLike

/** The close code and reason the service sends when it cannot resume from the `after` id. */
export const RESYNC_CLOSE_CODE = 4410
const TOKEN_EXPIRED_CLOSE_CODE = 1008

export type StreamEvent<T extends EventType = EventType> = EventEnvelope & { type: T }

export type StreamItem<T extends EventType = EventType> =
  | { kind: 'event'; event: StreamEvent<T> }
  /** Events after `after` are gone from the service: re-read state from the REST API. */
  | { kind: 'resync_required'; after: string | undefined }

export interface StreamOptions<T extends EventType = EventType> {
  /** Only these event types (all when absent). */
  types?: readonly T[]
  /** Resume after this event id (one a previous stream gave); live events only when absent. */
  after?: string
  /** Told when the socket opens (true) and when it drops (false). */
  onStatus?: (connected: boolean) => void
  /** First reconnect delay, doubled on each failure up to maxDelayMs (defaults 250 ms and 15 s). */
  minDelayMs?: number
  maxDelayMs?: number
  /** Items held for a slow consumer before a `ws` socket is paused (default 1,000). */
  highWaterMark?: number
}

export class EventStream<T extends EventType = EventType> implements AsyncIterable<StreamItem<T>> {
  /** The largest event id received: where a reconnect resumes. */
  lastEventId: string | undefined
  private readonly queue: StreamItem<T>[] = []
  private wake: (() => void) | null = null
  private socket: WebSocketLike | null = null
  private closed = false
  private delayMs: number
  private forceToken = false
  private timer: ReturnType<typeof setTimeout> | null = null
  private paused = false
  private readonly highWater: number

  private readonly url: string
  private readonly auth: BearerSource
  private readonly WS: WebSocketConstructor
  private readonly opts: StreamOptions<T>

  constructor(url: string, auth: BearerSource, WS: WebSocketConstructor, opts: StreamOptions<T>) {
    this.url = url
    this.auth = auth
    this.WS = WS
    this.opts = opts
    this.lastEventId = opts.after
    this.delayMs = opts.minDelayMs ?? 250
    this.highWater = opts.highWaterMark ?? 1_000
    void this.connect()
  }

  /** Stops the stream: the socket is closed and the iterator ends. */
  close(): void {
    if (this.closed) return
    this.closed = true
    if (this.timer) clearTimeout(this.timer)
    const ws = this.socket
    this.socket = null
    ws?.close(1000)
    this.notify()
  }

  async *[Symbol.asyncIterator](): AsyncIterator<StreamItem<T>> {
    try {
      for (;;) {
        const item = this.queue.shift()
        if (item) {
          if (this.paused && this.queue.length <= this.highWater / 2) { this.paused = false; this.socket?.resume?.() }
          yield item
          continue
        }
        if (this.closed) return
        await new Promise<void>(resolve => { this.wake = resolve })
      }
    } finally {
      this.close()
    }
  }

  private notify(): void {
    const w = this.wake
    this.wake = null
    w?.()
  }

  private push(item: StreamItem<T>): void {
    this.queue.push(item)
    if (!this.paused && this.queue.length >= this.highWater && this.socket?.pause) { this.paused = true; this.socket.pause() }
    this.notify()
  }

  private async connect(): Promise<void> {
    if (this.closed) return
    let token: string
    try {
      token = await this.auth.token(this.forceToken)
      this.forceToken = false
    } catch {
      return this.retryLater() // the token exchange failed (network, 429): try again later
    }
    if (this.closed) return
    const q = new URLSearchParams()
    if (this.opts.types?.length) q.set('types', this.opts.types.join(','))
    if (this.lastEventId) q.set('after', this.lastEventId)
    const query = q.toString()
    let ws: WebSocketLike
    try {
      ws = new this.WS(this.url + (query ? `?${query}` : ''), ['bearer', token])
    } catch {
      return this.retryLater()
    }
    this.socket = ws
    let opened = false
    ws.onopen = () => {
      opened = true
      this.delayMs = this.opts.minDelayMs ?? 250
      this.opts.onStatus?.(true)
    }
    ws.onmessage = m => {
      if (this.socket !== ws) return
      let event: StreamEvent<T>
      try { event = JSON.parse(typeof m.data === 'string' ? m.data : String(m.data)) as StreamEvent<T> } catch { return }
      if (typeof event?.id !== 'string') return
      // The largest id processed: an event the service committed late comes behind larger ids.
      if (!this.lastEventId || event.id > this.lastEventId) this.lastEventId = event.id
      this.push({ kind: 'event', event })
    }
    ws.onerror = () => { /* a close follows */ }
    ws.onclose = ev => {
      if (this.socket !== ws) return
      this.socket = null
      this.paused = false
      if (opened) this.opts.onStatus?.(false)
      if (this.closed) return
      if (ev.code === RESYNC_CLOSE_CODE) {
        this.push({ kind: 'resync_required', after: this.lastEventId })
        this.lastEventId = undefined
        return void this.connect()
      }
      if (ev.code === TOKEN_EXPIRED_CLOSE_CODE) this.forceToken = true
      this.retryLater()
    }
  }

  private retryLater(): void {
    if (this.closed) return
    const max = this.opts.maxDelayMs ?? 15_000
    const wait = this.delayMs / 2 + Math.random() * this.delayMs / 2
    this.delayMs = Math.min(this.delayMs * 2, max)
    this.timer = setTimeout(() => { this.timer = null; void this.connect() }, wait)
  }
}

/** `http://host/x` → `ws://host/x/v1/stream` (https → wss). */
export function streamUrl(baseUrl: string): string {
  return baseUrl.replace(/^http/i, 'ws').replace(/\/+$/, '') + '/v1/stream'
}
