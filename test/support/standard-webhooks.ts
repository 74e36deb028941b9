// A delivery checked as a tenant's receiver checks it, with the `standardwebhooks` package (its own
// HMAC and base64, independent of api/webhooks/signing.ts). With a fake clock (`nowMs`), the
// signature is the package's and the 5-minute tolerance is judged against that clock, since the
// package's verify() reads Date.now().
import type { IncomingHttpHeaders } from 'node:http'
import { Webhook } from 'standardwebhooks'

const TOLERANCE_SECONDS = 300

function header(headers: IncomingHttpHeaders | Record<string, string>, name: string): string {
  const v = headers[name]
  return (Array.isArray(v) ? v[0] : v) ?? ''
}

export function verifyDelivery(secret: string, body: string, headers: IncomingHttpHeaders | Record<string, string>, nowMs?: number): boolean {
  const id = header(headers, 'webhook-id'), ts = header(headers, 'webhook-timestamp'), sigs = header(headers, 'webhook-signature')
  if (nowMs === undefined) {
    try {
      new Webhook(secret).verify(body, { 'webhook-id': id, 'webhook-timestamp': ts, 'webhook-signature': sigs })
      return true
    } catch {
      return false
    }
  }
  if (!/^\d{1,12}$/.test(ts) || Math.abs(Math.floor(nowMs / 1000) - Number(ts)) > TOLERANCE_SECONDS) return false
  const want = new Webhook(secret).sign(id, new Date(Number(ts) * 1000), body)
  return sigs.split(' ').includes(want)
}
