// The event stream (/v1/stream, DECISIONS 6) for the whole page: one WebSocket, the dashboard
// token as the subprotocol pair `bearer, <jwt>` (browsers cannot set headers on a WebSocket; the
// URL never carries it). Reconnects with backoff; a 1008 (token expired) or a refused handshake
// after a lapsed token ends in the login page through the API's next 401.
import { session } from './api.js'

export interface EventEnvelope {
  id: string
  type: string
  createdAt: string
  data: {
    sessionId: string
    tenantId: string
    proxyNumber: string
    state?: string
    callId?: string
    smsId?: string
    direction?: string
    status?: string
    durationSeconds?: number
    timestamp?: string
  }
}

type Listener = (e: EventEnvelope) => void
type StatusListener = (connected: boolean) => void

const listeners = new Set<Listener>()
const statusListeners = new Set<StatusListener>()
let socket: WebSocket | null = null
let retryMs = 500
let timer: ReturnType<typeof setTimeout> | null = null
let stopped = true
let connected = false

function setConnected(c: boolean): void {
  connected = c
  for (const l of statusListeners) l(c)
}

function open(): void {
  const l = session()
  if (!l || stopped) return
  const url = `${location.protocol === 'https:' ? 'wss:' : 'ws:'}//${location.host}/v1/stream`
  const ws = new WebSocket(url, ['bearer', l.accessToken])
  socket = ws
  ws.onopen = () => { retryMs = 500; setConnected(true) }
  ws.onmessage = m => {
    let e: EventEnvelope
    try { e = JSON.parse(String(m.data)) as EventEnvelope } catch { return }
    for (const fn of listeners) fn(e)
  }
  ws.onclose = () => {
    if (socket !== ws) return
    socket = null
    setConnected(false)
    if (stopped) return
    timer = setTimeout(open, retryMs)
    retryMs = Math.min(retryMs * 2, 15_000)
  }
}

export function startLive(): void {
  if (!stopped) return
  stopped = false
  open()
}

export function stopLive(): void {
  stopped = true
  if (timer) clearTimeout(timer)
  const ws = socket
  socket = null
  ws?.close(1000)
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
