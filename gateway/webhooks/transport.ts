// One webhook POST over node:http(s). No redirects are followed (a 3xx is a failed attempt, so a
// public URL cannot bounce us to 169.254.169.254), the connection uses the addresses checked by
// `pinnedLookup`, and one timer bounds the whole attempt (DNS, connect, TLS, response headers).
// node:https rather than fetch: undici is not a dependency of ours, and its Agent would be the
// only other way to pin the resolved address.
import http from 'node:http'
import https from 'node:https'
import { checkWebhookUrl, pinnedLookup, type Resolver } from '../../api/webhooks/ssrf.js'

export interface DeliveryRequest {
  url: string
  headers: Record<string, string>
  body: string
  timeoutMs: number
  /** Default application/json. */
  contentType?: string
  /** Read the answer's body, up to this many bytes (more: an error); by default only its status. */
  readBody?: number
}

/** `statusCode` 0 when no HTTP answer came back; `error` a short code, never a URL or a secret. */
export interface DeliveryResult {
  statusCode: number
  error: string | null
  /** With DeliveryRequest.readBody: the answer's body and content type. */
  body?: string
  contentType?: string
}

export type WebhookTransport = (req: DeliveryRequest) => Promise<DeliveryResult>

export function errorCode(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code
  switch (code) {
    case 'EBLOCKEDADDRESS': return 'blocked-address'
    case 'ENOTFOUND': case 'EAI_AGAIN': case 'EAI_FAIL': case 'EAI_NONAME': return 'dns-failure'
    case 'ECONNREFUSED': return 'connection-refused'
    case 'ECONNRESET': case 'EPIPE': case 'ECONNABORTED': return 'connection-reset'
    case 'EHOSTUNREACH': case 'ENETUNREACH': return 'unreachable'
    case 'ETIMEDOUT': return 'timeout'
  }
  if (typeof code === 'string' && /CERT|TLS|SSL|SELF_SIGNED|ERR_SSL/.test(code)) return 'tls-error'
  return 'network-error'
}

export interface HttpTransport extends WebhookTransport {
  close(): void
}

export function createHttpTransport(opts: { allowInsecure: boolean; userAgent?: string; resolve?: Resolver }): HttpTransport {
  const lookup = pinnedLookup(opts.allowInsecure, opts.resolve)
  // Keep-alive pools are keyed by host:port; every pooled socket was connected through `lookup`.
  const agents = {
    'https:': new https.Agent({ keepAlive: true, maxSockets: 16, lookup } as https.AgentOptions),
    'http:': new http.Agent({ keepAlive: true, maxSockets: 16, lookup } as http.AgentOptions),
  }
  const userAgent = opts.userAgent ?? 'maskline-webhooks/1'

  const send = (req: DeliveryRequest): Promise<DeliveryResult> => new Promise(resolve => {
    const checked = checkWebhookUrl(req.url, { allowInsecure: opts.allowInsecure })
    if (!checked.ok) return resolve({ statusCode: 0, error: checked.reason })
    const url = checked.url
    const mod = url.protocol === 'https:' ? https : http
    let settled = false
    let r: http.ClientRequest | undefined
    const timer = setTimeout(() => {
      finish({ statusCode: 0, error: 'timeout' })
      r?.destroy()
    }, req.timeoutMs)
    const finish = (result: DeliveryResult) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      resolve(result)
    }
    const body = Buffer.from(req.body, 'utf8')
    try {
      r = mod.request(url, {
        method: 'POST',
        agent: agents[url.protocol as 'https:' | 'http:'],
        lookup,
        headers: {
          ...req.headers,
          'content-type': req.contentType ?? 'application/json',
          'content-length': String(body.length),
          'user-agent': userAgent,
        },
      }, res => {
        res.on('error', () => {})
        if (req.readBody !== undefined) return readAnswer(res, req.readBody, finish)
        res.resume()
        finish({ statusCode: res.statusCode ?? 0, error: null })
        // The status is all we need; the body is drained (so the socket can be reused) within a bound.
        const drain = setTimeout(() => r?.destroy(), req.timeoutMs)
        drain.unref()
        res.on('close', () => clearTimeout(drain))
      })
      r.on('error', err => finish({ statusCode: 0, error: errorCode(err) }))
      r.end(body)
    } catch (err) {
      finish({ statusCode: 0, error: errorCode(err) })
    }
  })

  return Object.assign(send, {
    close() {
      agents['https:'].destroy()
      agents['http:'].destroy()
    },
  })
}

/** The whole answer within `limit` bytes (the request's timer still bounds it). */
function readAnswer(res: http.IncomingMessage, limit: number, finish: (r: DeliveryResult) => void): void {
  const chunks: Buffer[] = []
  let size = 0
  res.on('data', (c: Buffer) => {
    size += c.length
    if (size > limit) { finish({ statusCode: 0, error: 'answer-too-large' }); res.destroy() } else chunks.push(c)
  })
  res.on('end', () => finish({
    statusCode: res.statusCode ?? 0, error: null, body: Buffer.concat(chunks).toString('utf8'), contentType: String(res.headers['content-type'] ?? ''),
  }))
}
