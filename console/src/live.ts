// The event stream (/v1/stream, contract D6) for the whole page: one stream of the client SDK
// (sdk/src/stream.ts), with the dashboard token as the subprotocol pair `bearer, <jwt>` (browsers
// cannot set headers on a WebSocket; the URL never carries it). The SDK reconnects with backoff
// and resumes after the last event it received; a 1008 (token expired) or a refused handshake
// after a lapsed token ends in the login page through the API's next 401.
import { sdk, session } from './api.js'
import type { EventStream } from '../../sdk/src/stream.js'
import type { EventEnvelope } from '../../sdk/src/types.js'

export type { EventEnvelope }

type Listener = (e: EventEnvelope) => void
type StatusListener = (connected: boolean) => void

const listeners = new Set<Listener>()
const statusListeners = new Set<StatusListener>()
let stream: EventStream | null = null
let connected = false

function setConnected(c: boolean): void {
  connected = c
  for (const l of statusListeners) l(c)
}

export function startLive(): void {
  if (stream || !session()) return
  const s = sdk().stream({ minDelayMs: 500, onStatus: setConnected })
  stream = s
  void (async () => {
    for await (const item of s) {
      // resync_required: the views reload on their own timers; live events follow.
      if (item.kind === 'event') for (const fn of listeners) fn(item.event)
    }
  })()
}

export function stopLive(): void {
  const s = stream
  stream = null
  s?.close()
  setConnected(false)
}

/** Every event of the tenant; returns the unsubscribe. */
export function onEvent(fn: Listener): () => void {
  listeners.add(fn)
  return () => listeners.delete(fn)
}

export function onStatus(fn: StatusListener): () => void {
  statusListeners.add(fn)
  fn(connected)
  return () => statusListeners.delete(fn)
}
