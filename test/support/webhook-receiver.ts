// A tenant's webhook endpoint for tests: listens on 127.0.0.1, port 0, verifies every delivery's
// Standard Webhooks signature and records it. It can be scripted to answer an error status, to
// answer late, or to hang (so the sender's timeout fires) for the next N requests.
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { verifyDelivery } from './standard-webhooks.js'

export interface ReceivedDelivery {
  id: string
  timestamp: number
  body: string
  json: { id: string; type: string; createdAt: string; data: Record<string, unknown> }
  /** Did the signature check out under the receiver's secret? */
  verified: boolean
  headers: http.IncomingHttpHeaders
  /** What the receiver answered (0 while it hangs or delays, and when the sender left first). */
  answered: number
  /** Date.now() when the request had been read. */
  receivedAt: number
}

/** `delayMs`: the answer is written that late, unless the sender has closed the connection by then. */
export type Behaviour = { status: number; delayMs?: number } | 'hang'

export interface WebhookReceiver {
  /** http://127.0.0.1:<port>/hook */
  url: string
  deliveries: ReceivedDelivery[]
  /** Deliveries answered 2xx, in arrival order. */
  accepted(): ReceivedDelivery[]
  setSecret(secret: string): void
  /** The next `times` requests get `behaviour` (then back to 200). */
  script(behaviour: Behaviour, times?: number): void
  /** Requests that arrived and are not answered yet (hanging, or delayed), connection still open. */
  pending(): ReceivedDelivery[]
  /** Answers a pending request now (a hang or a delay cut short); false when it is not pending. */
  answer(d: ReceivedDelivery, status?: number): boolean
  /** Resolves once `n` requests (any answer) have arrived. */
  waitFor(n: number, timeoutMs?: number): Promise<void>
  close(): Promise<void>
}

export async function startWebhookReceiver(opts: { secret?: string; now?: () => number } = {}): Promise<WebhookReceiver> {
  let secret = opts.secret ?? ''
  const deliveries: ReceivedDelivery[] = []
  const queue: Behaviour[] = []
  const waiters: Array<{ n: number; resolve: () => void }> = []
  /** Hanging or delayed, not answered yet. */
  const open = new Map<ReceivedDelivery, http.ServerResponse>()

  function respond(d: ReceivedDelivery, res: http.ServerResponse, status: number) {
    open.delete(d)
    d.answered = status
    res.writeHead(status, { 'content-type': 'text/plain' }).end('ok')
  }

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', c => chunks.push(c))
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8')
      const behaviour = queue.shift() ?? { status: 200 }
      let json: ReceivedDelivery['json']
      try { json = JSON.parse(body) } catch { json = { id: '', type: '', createdAt: '', data: {} } }
      const verified = secret !== '' && verifyDelivery(secret, body, req.headers, opts.now?.())
      const d: ReceivedDelivery = {
        id: String(req.headers['webhook-id'] ?? ''),
        timestamp: Number(req.headers['webhook-timestamp'] ?? 0),
        body, json, verified, headers: req.headers,
        answered: 0,
        receivedAt: Date.now(),
      }
      deliveries.push(d)
      for (const w of [...waiters]) {
        if (deliveries.length >= w.n) { waiters.splice(waiters.indexOf(w), 1); w.resolve() }
      }
      if (behaviour !== 'hang' && !behaviour.delayMs) return respond(d, res, behaviour.status)
      open.set(d, res)
      res.on('close', () => open.delete(d)) // answered, or the sender gave up or died
      if (behaviour === 'hang') return
      const timer = setTimeout(() => { if (open.has(d)) respond(d, res, behaviour.status) }, behaviour.delayMs)
      res.on('close', () => clearTimeout(timer))
    })
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo

  return {
    url: `http://127.0.0.1:${port}/hook`,
    deliveries,
    accepted: () => deliveries.filter(d => d.answered >= 200 && d.answered < 300),
    pending: () => [...open.keys()],
    answer(d, status = 200) {
      const res = open.get(d)
      if (res) respond(d, res, status)
      return res !== undefined
    },
    setSecret(s) { secret = s },
    script(behaviour, times = 1) { for (let i = 0; i < times; i++) queue.push(behaviour) },
    waitFor(n, timeoutMs = 10_000) {
      if (deliveries.length >= n) return Promise.resolve()
      return new Promise((resolve, reject) => {
        const w = { n, resolve: () => { clearTimeout(t); resolve() } }
        const t = setTimeout(() => {
          waiters.splice(waiters.indexOf(w), 1)
          reject(new Error(`webhook receiver: ${deliveries.length} of ${n} deliveries after ${timeoutMs} ms`))
        }, timeoutMs)
        waiters.push(w)
      })
    },
    async close() {
      for (const res of open.values()) res.destroy()
      server.closeAllConnections()
      await new Promise<void>(resolve => server.close(() => resolve()))
    },
  }
}
