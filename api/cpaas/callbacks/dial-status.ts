// POST /v1/webhooks/cpaas/voice/dial-status: the Dial's outcome for the parent call. Answers
// TeXML Hangup at once.
import type { ApiReply, ApiRequest } from '../../route.js'
import { callStatus } from './call-status.js'
import type { CallbackContext } from './context.js'

export function dialStatus(ctx: CallbackContext, req: ApiRequest): ApiReply {
  return callStatus(ctx, req, 'dial-status')
}
