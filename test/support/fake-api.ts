// What the local stand-ins for the providers' REST APIs share (fake-telnyx.ts, fake-twilio.ts): an
// HTTP server on a free port that records every request and answers it with the behaviour the
// test injected (latency, HTTP error, hang, dropped connection), one-shot or for every request.
// Each fake parses its API's bodies and answers in its API's shape.
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

export interface FakeBehaviour {
  /** Delay before answering (ms). */
  latencyMs?: number
  /** Answer with this HTTP status and the API's error body. */
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

export type BehaviourFn = (req: FakeRequest, index: number) => FakeBehaviour | undefined

export interface FakeRequest {
  method: string
  path: string
  headers: IncomingHttpHeaders
  /** Parsed body (or the raw string when it could not be parsed). */
  body: unknown
}

/** One outbound message as the provider received it: `webhook` is its delivery-status URL. */
export interface SentMessage { from: string; to: string; text: string; webhook: string | null }

export abstract class FakeApi {
  readonly requests: FakeRequest[] = []
  readonly #server: Server
  #queue: FakeBehaviour[] = []
  #default: FakeBehaviour | BehaviourFn = {}
  #port = 0
  readonly #timers = new Set<NodeJS.Timeout>()

  protected constructor(parseBody: (raw: Buffer) => unknown) {
    this.#server = createServer((req, res) => {
      const chunks: Buffer[] = []
      req.on('data', (c: Buffer) => chunks.push(c))
      req.on('end', () => {
        const url = new URL(req.url ?? '/', 'http://fake')
        const record: FakeRequest = { method: req.method ?? 'GET', path: url.pathname, headers: req.headers, body: parseBody(Buffer.concat(chunks)) }
        const index = this.requests.length
        this.requests.push(record)
        const b = this.#queue.shift() ?? (typeof this.#default === 'function' ? this.#default(record, index) ?? {} : this.#default)
        if (b.hang) return
        const respond = () => b.drop ? void res.socket?.destroy() : this.respond(record, b, res)
        if (!b.latencyMs) return respond()
        const t = setTimeout(() => { this.#timers.delete(t); respond() }, b.latencyMs)
        this.#timers.add(t)
      })
    })
  }

  /** Answers one request (not hung, not dropped) in the API's shape. */
  protected abstract respond(req: FakeRequest, b: FakeBehaviour, res: ServerResponse): void

  protected async listen(): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      this.#server.once('error', reject)
      this.#server.listen(0, '127.0.0.1', () => resolve())
    })
    this.#port = (this.#server.address() as AddressInfo).port
  }

  /** `http://127.0.0.1:<port>`. */
  get origin(): string {
    return `http://127.0.0.1:${this.#port}`
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
    for (const t of this.#timers) clearTimeout(t)
    this.#timers.clear()
    this.#server.closeAllConnections()
    await new Promise<void>(resolve => this.#server.close(() => resolve()))
  }
}

export function json(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body)
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) })
  res.end(text)
}
