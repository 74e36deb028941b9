// A tenant's webhook endpoint for tests: listens on 127.0.0.1, port 0, verifies every delivery's
// Standard Webhooks signature and records it. It can be scripted to answer an error status or
// to hang (so the sender's timeout fires) for the next N requests.
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { verify } from '../../gateway/webhooks/signing.js'

export interface ReceivedDelivery {
  id: string
  timestamp: number
  body: string
  json: { id: string; type: string; createdAt: string; data: Record<string, unknown> }
  /** Did the signature check out under the receiver's secret? */
  verified: boolean
  headers: http.IncomingHttpHeaders
  /** What the receiver answered (0 when it hung). */
  answered: number
}

export type Behaviour = { status: number } | 'hang'

export interface WebhookReceiver {
  /** http://127.0.0.1:<port>/hook */
  url: string
  deliveries: ReceivedDelivery[]
  /** Deliveries answered 2xx, in arrival order. */
  accepted(): ReceivedDelivery[]
  setSecret(secret: string): void
  /** The next `times` requests get `behaviour` (then back to 200). */
  script(behaviour: Behaviour, times?: number): void
  /** Resolves once `n` requests (any answer) have arrived. */
  waitFor(n: number, timeoutMs?: number): Promise<void>
  close(): Promise<void>
}

export async function startWebhookReceiver(opts: { secret?: string; now?: () => number } = {}): Promise<WebhookReceiver> {
  let secret = opts.secret ?? ''
  const deliveries: ReceivedDelivery[] = []
  const queue: Behaviour[] = []
  const waiters: Array<{ n: number; resolve: () => void }> = []
  const hung = new Set<http.ServerResponse>()

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', c => chunks.push(c))
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8')
      const behaviour = queue.shift() ?? { status: 200 }
      let json: ReceivedDelivery['json']
      try { json = JSON.parse(body) } catch { json = { id: '', type: '', createdAt: '', data: {} } }
      const verified = secret !== '' && verify(secret, body, req.headers, { now: opts.now?.() }).ok
      deliveries.push({
        id: String(req.headers['webhook-id'] ?? ''),
        timestamp: Number(req.headers['webhook-timestamp'] ?? 0),
        body, json, verified, headers: req.headers,
        answered: behaviour === 'hang' ? 0 : behaviour.status,
      })
      for (const w of [...waiters]) {
        if (deliveries.length >= w.n) { waiters.splice(waiters.indexOf(w), 1); w.resolve() }
      }
      if (behaviour === 'hang') { hung.add(res); res.on('close', () => hung.delete(res)); return }
      res.writeHead(behaviour.status, { 'content-type': 'text/plain' }).end('ok')
    })
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo

  return {
    url: `http://127.0.0.1:${port}/hook`,
    deliveries,
    accepted: () => deliveries.filter(d => d.answered >= 200 && d.answered < 300),
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
      for (const res of hung) res.destroy()
      server.closeAllConnections()
      await new Promise<void>(resolve => server.close(() => resolve()))
    },
  }
}
