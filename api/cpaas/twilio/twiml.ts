// TwiML answers for Twilio's voice callbacks. TeXML is Telnyx's copy of TwiML: the verbs and
// attributes maskline answers with (Say, Play, Dial callerId/timeLimit/action/record/
// recordingStatusCallback, Number statusCallback/statusCallbackEvent, Reject reason, Hangup) mean
// the same in both, so the renderer is telnyx/texml.ts's; what is Twilio's own is where its
// callbacks go (/v1/webhooks/twilio/...). The presented number comes from the decision
// (`callerId`), as for TeXML.
import type { Dialect } from '../dialect.js'
import { decisionTexml, type RouteDecision } from '../telnyx/texml.js'

export const TWILIO_CALLBACK_PREFIX = '/v1/webhooks/twilio'

/** decision → TwiML; `callId` is required for 'connect' only. */
export function decisionTwiml(decision: RouteDecision, opts: { baseUrl: string; callId?: string | null; timeLimitSeconds?: number }): string {
  return decisionTexml(decision, { ...opts, callbackPrefix: TWILIO_CALLBACK_PREFIX })
}

/** The Twilio dialect (api/cpaas/dialect.ts). */
export const TWILIO_DIALECT: Dialect = {
  provider: 'twilio', prefix: TWILIO_CALLBACK_PREFIX, smsAnswer: 'xml',
  answer: decisionTwiml,
}
