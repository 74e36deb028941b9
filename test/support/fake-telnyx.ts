// A local stand-in for the Telnyx REST API: POST /v2/messages answered like Telnyx, with
// per-request behaviour injected by the test (latency, HTTP error, hang). The real `telnyx` SDK
// talks to it through `baseURL`. Never set TELNYX_CLIENT_ID/SECRET in tests: the SDK would try
// api.telnyx.com for an OAuth token.
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { randomUUID } from 'node:crypto'

export interface FakeBehaviour {
  /** Delay before answering (ms). */
  latencyMs?: number
  /** Answer with this HTTP status and a Telnyx-style `{errors: [...]}` body. */
  status?: number
  /** Never answer (until close()); the client must time out. */
  hang?: boolean
  /** Send the status line and headers at once, then never finish the body. */
  stallBody?: boolean
  /** Close the socket without answering. */
  drop?: boolean
  /** Replace the success body. */
  body?: unknown
}

/** One outbound message as the provider received it: `webhook` is its delivery-status URL. */
export interface SentMessage { from: string; to: string; text: string; webhook: string | null }

export type BehaviourFn = (req: FakeRequest, index: number) => FakeBehaviour | undefined

export interface FakeRequest {
  method: string
  path: string
  headers: IncomingHttpHeaders
  /** Parsed JSON body (or the raw string when it was not JSON). */
  body: unknown
}

export interface FakeTelnyxOptions {
  /** When set, requests without `Authorization: Bearer <apiKey>` get 401. */
  apiKey?: string
}

export class FakeTelnyx {
  readonly requests: FakeRequest[] = []
  #server: Server
  #queue: FakeBehaviour[] = []
  #default: FakeBehaviour | BehaviourFn = {}
  #apiKey: string | undefined
  #port = 0
  #pendingTimers = new Set<NodeJS.Timeout>()

  private constructor(opts: FakeTelnyxOptions) {
    this.#apiKey = opts.apiKey
    this.#server = createServer((req, res) => {
      const chunks: Buffer[] = []
      req.on('data', (c: Buffer) => chunks.push(c))
      req.on('end', () => {
        const raw = Buffer.concat(chunks).toString('utf8')
        let body: unknown = raw
        try { body = raw ? JSON.parse(raw) : undefined } catch { /* keep the raw string */ }
        const url = new URL(req.url ?? '/', 'http://fake')
        const record: FakeRequest = { method: req.method ?? 'GET', path: url.pathname, headers: req.headers, body }
        const index = this.requests.length
        this.requests.push(record)
        this.#answer(record, index, res)
      })
    })
  }

  static async start(opts: FakeTelnyxOptions = {}): Promise<FakeTelnyx> {
    const fake = new FakeTelnyx(opts)
    await new Promise<void>((resolve, reject) => {
      fake.#server.once('error', reject)
      fake.#server.listen(0, '127.0.0.1', () => resolve())
    })
    fake.#port = (fake.#server.address() as AddressInfo).port
    return fake
  }

  get baseURL(): string {
    return `http://127.0.0.1:${this.#port}/v2`
  }

  /** Requests to POST /v2/messages received so far. */
  get count(): number {
    return this.requests.filter(r => r.method === 'POST' && r.path === '/v2/messages').length
  }

  /** The messages sent so far, in the suites' provider-neutral shape (fake-twilio.ts has the same). */
  get sent(): SentMessage[] {
    return this.requests.filter(r => r.method === 'POST' && r.path === '/v2/messages').map(r => {
      const b = r.body as Record<string, string>
      return { from: b.from!, to: b.to!, text: b.text!, webhook: b.webhook_url ?? null }
    })
  }

  /** Behaviour for every request not covered by the queue (an object or a function of the request). */
  setBehaviour(b: FakeBehaviour | BehaviourFn): this {
    this.#default = b
    return this
  }

  /** One-shot behaviours, consumed in order by the next requests. */
  enqueue(...b: FakeBehaviour[]): this {
    this.#queue.push(...b)
    return this
  }

  reset(): this {
    this.requests.length = 0
    this.#queue = []
    this.#default = {}
    return this
  }

  async close(): Promise<void> {
    for (const t of this.#pendingTimers) clearTimeout(t)
    this.#pendingTimers.clear()
    this.#server.closeAllConnections()
    await new Promise<void>(resolve => this.#server.close(() => resolve()))
  }

  #answer(req: FakeRequest, index: number, res: ServerResponse): void {
    const b = this.#queue.shift() ?? (typeof this.#default === 'function' ? this.#default(req, index) ?? {} : this.#default)
    if (b.hang) return
    const respond = () => {
      if (b.drop) { res.socket?.destroy(); return }
      if (this.#apiKey !== undefined && req.headers.authorization !== `Bearer ${this.#apiKey}`) {
        return json(res, 401, { errors: [{ code: '10009', title: 'Authentication failed', detail: 'fake' }] })
      }
      if (req.method !== 'POST' || req.path !== '/v2/messages') {
        return json(res, 404, { errors: [{ code: '10005', title: 'Resource not found', detail: 'fake' }] })
      }
      if (b.status !== undefined && (b.status < 200 || b.status >= 300)) {
        return json(res, b.status, { errors: [{ code: '10007', title: 'Unexpected error', detail: 'injected by fake-telnyx' }] })
      }
      if (b.stallBody) {
        res.writeHead(b.status ?? 200, { 'content-type': 'application/json' })
        res.write('{"data":')
        return
      }
      json(res, b.status ?? 200, b.body ?? messageBody(req.body))
    }
    if (b.latencyMs) {
      const t = setTimeout(() => { this.#pendingTimers.delete(t); respond() }, b.latencyMs)
      this.#pendingTimers.add(t)
    } else {
      respond()
    }
  }
}

function json(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body)
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) })
  res.end(text)
}

/** Shape of Telnyx's answer to POST /v2/messages (trimmed to the fields worth faking). */
function messageBody(reqBody: unknown): unknown {
  const b = (typeof reqBody === 'object' && reqBody !== null ? reqBody : {}) as Record<string, unknown>
  const now = new Date().toISOString()
  return {
    data: {
      record_type: 'message',
      direction: 'outbound',
      id: randomUUID(),
      type: 'SMS',
      messaging_profile_id: b.messaging_profile_id ?? null,
      from: { phone_number: b.from ?? null, carrier: 'TELNYX LLC', line_type: 'VoIP' },
      to: [{ phone_number: b.to ?? null, status: 'queued', carrier: 'FAKE', line_type: 'Wireless' }],
      text: b.text ?? '',
      media: [],
      webhook_url: b.webhook_url ?? null,
      encoding: 'GSM-7',
      parts: 1,
      tags: [],
      cost: null,
      received_at: now,
      sent_at: null,
      completed_at: null,
      valid_until: null,
      errors: [],
    },
  }
}
