// What differs between the providers' callback dialects: where their callbacks are posted, how a
// routing decision is answered (TeXML for Telnyx, TwiML for Twilio) and how an inbound message is
// acknowledged. The handlers in callbacks/ are the same for every provider; each provider's folder
// (telnyx/, twilio/) exports its dialect.
import type { RouteDecision } from './telnyx/texml.js'

export interface Dialect {
  /** The provider these callbacks come from, as proxy_numbers.provider names it. */
  readonly provider: 'telnyx' | 'twilio'
  /** Path prefix of this provider's callbacks, e.g. `/v1/webhooks/twilio`. */
  readonly prefix: string
  /** The answer to a voice fetch. `callId` is required for 'connect' only. */
  answer(decision: RouteDecision, opts: { baseUrl: string; callId?: string | null }): string
  /** How the messaging webhook is answered: `{"ok":...}` JSON (Telnyx), or an empty TwiML
   * `<Response/>` (Twilio: it reads the answer as TwiML and sends no message for an empty one). */
  readonly smsAnswer: 'json' | 'xml'
}
