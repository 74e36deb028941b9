// A local stand-in for the Telnyx REST API: POST /v2/messages answered like Telnyx, with
// per-request behaviour injected by the test (latency, HTTP error, hang). The real `telnyx` SDK
// talks to it through `baseURL`. Never set TELNYX_CLIENT_ID/SECRET in tests: the SDK would try
// api.telnyx.com for an OAuth token.
import type { ServerResponse } from 'node:http'
import { randomUUID } from 'node:crypto'
import { FakeApi, json, type FakeBehaviour, type FakeRequest, type SentMessage } from './fake-api.js'

export type { BehaviourFn, FakeBehaviour, FakeRequest, SentMessage } from './fake-api.js'

export interface FakeTelnyxOptions {
  /** When set, requests without `Authorization: Bearer <apiKey>` get 401. */
  apiKey?: string
}

export class FakeTelnyx extends FakeApi {
  readonly #apiKey: string | undefined

  private constructor(opts: FakeTelnyxOptions) {
    super(buf => {
      const raw = buf.toString('utf8')
      try { return raw ? JSON.parse(raw) : undefined } catch { return raw }
    })
    this.#apiKey = opts.apiKey
  }

  static async start(opts: FakeTelnyxOptions = {}): Promise<FakeTelnyx> {
    const fake = new FakeTelnyx(opts)
    await fake.listen()
    return fake
  }

  get baseURL(): string {
    return `${this.origin}/v2`
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

  protected respond(req: FakeRequest, b: FakeBehaviour, res: ServerResponse): void {
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
