// A local stand-in for Twilio's REST API: POST /2010-04-01/Accounts/{AccountSid}/Messages.json
// answered like Twilio (201 and a Message resource, or Twilio's error body), with per-request
// behaviour injected by the test as for fake-telnyx.ts (latency, HTTP error, hang, drop). The real
// `twilio` SDK talks to it through TWILIO_BASE_URL (api/cpaas/twilio/provider.ts).
import type { ServerResponse } from 'node:http'
import { randomBytes } from 'node:crypto'
import { parseForm } from '../../api/cpaas/form.js'
import { FakeApi, json, type FakeBehaviour, type FakeRequest, type SentMessage } from './fake-api.js'

export const FAKE_ACCOUNT_SID = 'AC' + 'f'.repeat(32)
export const FAKE_AUTH_TOKEN = '0123456789abcdef0123456789abcdef'

export interface FakeTwilioOptions {
  accountSid?: string
  /** Basic auth accepted: accountSid:authToken (or an API key:secret pair given here). */
  user?: string
  password?: string
}

export class FakeTwilio extends FakeApi {
  readonly accountSid: string
  readonly #auth: string

  private constructor(opts: FakeTwilioOptions) {
    super(buf => parseForm(buf) ?? {})
    this.accountSid = opts.accountSid ?? FAKE_ACCOUNT_SID
    this.#auth = 'Basic ' + Buffer.from(`${opts.user ?? this.accountSid}:${opts.password ?? FAKE_AUTH_TOKEN}`).toString('base64')
  }

  static async start(opts: FakeTwilioOptions = {}): Promise<FakeTwilio> {
    const fake = new FakeTwilio(opts)
    await fake.listen()
    return fake
  }

  /** TWILIO_BASE_URL for this fake. */
  get baseUrl(): string {
    return this.origin
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

  protected respond(req: FakeRequest, b: FakeBehaviour, res: ServerResponse): void {
    if (req.headers.authorization !== this.#auth) return json(res, 401, twilioError(401, 20003, 'Authenticate'))
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
