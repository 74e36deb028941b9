// A local stand-in for Twilio's REST API: POST /2010-04-01/Accounts/{AccountSid}/Messages.json
// answered like Twilio (201 and a Message resource, or Twilio's error body), with per-request
// behaviour injected by the test as for fake-telnyx.ts (latency, HTTP error, hang, drop). The real
// `twilio` SDK talks to it through TWILIO_BASE_URL (api/cpaas/twilio/provider.ts).
import { createServer, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { randomBytes } from 'node:crypto'
import { parseForm } from '../../api/cpaas/form.js'
import type { BehaviourFn, FakeBehaviour, FakeRequest, SentMessage } from './fake-telnyx.js'

export const FAKE_ACCOUNT_SID = 'AC' + 'f'.repeat(32)
export const FAKE_AUTH_TOKEN = '0123456789abcdef0123456789abcdef'

export interface FakeTwilioOptions {
  accountSid?: string
  /** Basic auth accepted: accountSid:authToken (or an API key:secret pair given here). */
  user?: string
  password?: string
}

export class FakeTwilio {
  readonly requests: FakeRequest[] = []
  readonly accountSid: string
  #server: Server
  #queue: FakeBehaviour[] = []
  #default: FakeBehaviour | BehaviourFn = {}
  #port = 0
  #timers = new Set<NodeJS.Timeout>()

  private constructor(opts: FakeTwilioOptions) {
    this.accountSid = opts.accountSid ?? FAKE_ACCOUNT_SID
    const auth = 'Basic ' + Buffer.from(`${opts.user ?? this.accountSid}:${opts.password ?? FAKE_AUTH_TOKEN}`).toString('base64')
    this.#server = createServer((req, res) => {
      const chunks: Buffer[] = []
      req.on('data', (c: Buffer) => chunks.push(c))
      req.on('end', () => {
        const url = new URL(req.url ?? '/', 'http://fake')
        const record: FakeRequest = { method: req.method ?? 'GET', path: url.pathname, headers: req.headers, body: parseForm(Buffer.concat(chunks)) ?? {} }
        const index = this.requests.length
        this.requests.push(record)
        const b = this.#queue.shift() ?? (typeof this.#default === 'function' ? this.#default(record, index) ?? {} : this.#default)
        if (b.hang) return
        const respond = () => this.#answer(record, b, auth, res)
        if (!b.latencyMs) return respond()
        const t = setTimeout(() => { this.#timers.delete(t); respond() }, b.latencyMs)
        this.#timers.add(t)
      })
    })
  }

  static async start(opts: FakeTwilioOptions = {}): Promise<FakeTwilio> {
    const fake = new FakeTwilio(opts)
    await new Promise<void>((resolve, reject) => {
      fake.#server.once('error', reject)
      fake.#server.listen(0, '127.0.0.1', () => resolve())
    })
    fake.#port = (fake.#server.address() as AddressInfo).port
    return fake
  }

  /** TWILIO_BASE_URL for this fake. */
  get baseUrl(): string {
    return `http://127.0.0.1:${this.#port}`
  }

  get messagesPath(): string {
    return `/2010-04-01/Accounts/${this.accountSid}/Messages.json`
  }

  /** Messages created (POSTs to the Messages resource) so far, their form fields. */
  get messages(): Record<string, string>[] {
    return this.requests.filter(r => r.method === 'POST' && r.path === this.messagesPath).map(r => r.body as Record<string, string>)
  }

  get count(): number {
    return this.messages.length
  }

  /** The messages sent so far, in the suites' provider-neutral shape (as fake-telnyx.ts). */
  get sent(): SentMessage[] {
    return this.messages.map(m => ({ from: m.From!, to: m.To!, text: m.Body!, webhook: m.StatusCallback ?? null }))
  }

  setBehaviour(b: FakeBehaviour | BehaviourFn): this {
    this.#default = b
    return this
  }

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
    for (const t of this.#timers) clearTimeout(t)
    this.#timers.clear()
    this.#server.closeAllConnections()
    await new Promise<void>(resolve => this.#server.close(() => resolve()))
  }

  #answer(req: FakeRequest, b: FakeBehaviour, auth: string, res: ServerResponse): void {
    if (b.drop) { res.socket?.destroy(); return }
    if (req.headers.authorization !== auth) return json(res, 401, twilioError(401, 20003, 'Authenticate'))
    if (req.method !== 'POST' || req.path !== this.messagesPath) return json(res, 404, twilioError(404, 20404, 'The requested resource was not found'))
    if (b.status !== undefined && (b.status < 200 || b.status >= 300)) return json(res, b.status, twilioError(b.status, 20500, 'injected by fake-twilio'))
    json(res, b.status ?? 201, b.body ?? this.#message(req.body as Record<string, string>))
  }

  /** Twilio's Message resource as created (trimmed to the fields worth faking). */
  #message(f: Record<string, string>): unknown {
    const now = new Date().toUTCString()
    return {
      sid: 'SM' + randomBytes(16).toString('hex'), account_sid: this.accountSid, api_version: '2010-04-01',
      from: f.From ?? null, to: f.To ?? null, body: f.Body ?? '', status: 'queued', direction: 'outbound-api',
      num_segments: '1', num_media: '0', price: null, price_unit: 'USD', error_code: null, error_message: null,
      date_created: now, date_updated: now, date_sent: null, messaging_service_sid: null,
      uri: `/2010-04-01/Accounts/${this.accountSid}/Messages/SM.json`, subresource_uris: {},
    }
  }
}

function twilioError(status: number, code: number, message: string): unknown {
  return { code, message, more_info: `https://www.twilio.com/docs/errors/${code}`, status }
}

function json(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body)
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) })
  res.end(text)
}
