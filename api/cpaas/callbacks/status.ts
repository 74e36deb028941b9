// POST /v1/webhooks/cpaas/voice/status: a call leg's status (the dialed leg's, by our callId, or
// the TeXML application's own for the parent call, by its CallSid). Answers 200 at once.
import type { ApiReply, ApiRequest } from '../../route.js'
import { callStatus } from './call-status.js'
import type { CallbackContext } from './context.js'

export function voiceStatus(ctx: CallbackContext, req: ApiRequest): ApiReply {
  return callStatus(ctx, req, 'status')
}
