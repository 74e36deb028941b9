// Spec 4.10: the provider's callbacks. No JWT: signatures on the raw body are checked by the
// telephony module before anything is parsed. Not rate-limited per tenant (they are not API calls).
import { Type } from '@sinclair/typebox'
import { route, type ApiReply, type ApiRequest, type RouteDef } from '../route.js'
import type { Services } from '../services.js'

export interface CallbackHandlers {
  voice(req: ApiRequest): Promise<ApiReply>
  voiceStatus(req: ApiRequest): Promise<ApiReply>
  dialStatus(req: ApiRequest): Promise<ApiReply>
  recording(req: ApiRequest): Promise<ApiReply>
  sms(req: ApiRequest): Promise<ApiReply>
}

function handlersOf(s: Services): CallbackHandlers {
  const t = s['telephony'] as CallbackHandlers | undefined
  if (!t) throw new Error('telephony is not wired')
  return t
}

const XML = 'application/xml'
const common = { auth: 'none', rawBody: true, rateLimit: false, bodyLimit: 64 * 1024, problems: [] } as const

export const cpaasRoutes: RouteDef[] = [
  route({ ...common, method: 'POST', path: '/v1/webhooks/cpaas/voice', contentType: XML, summary: 'Inbound call: answers TeXML',
    response: { 200: Type.String(), 400: Type.String(), 403: Type.String() }, handler: req => handlersOf(req.services).voice(req) }),
  route({ ...common, method: 'POST', path: '/v1/webhooks/cpaas/voice/status', contentType: XML, summary: 'Call leg status',
    response: { 200: null, 400: Type.String(), 403: Type.String() }, handler: req => handlersOf(req.services).voiceStatus(req) }),
  route({ ...common, method: 'POST', path: '/v1/webhooks/cpaas/voice/dial-status', contentType: XML, summary: 'Dial outcome: answers Hangup',
    response: { 200: Type.String(), 400: Type.String(), 403: Type.String() }, handler: req => handlersOf(req.services).dialStatus(req) }),
  route({ ...common, method: 'POST', path: '/v1/webhooks/cpaas/voice/recording', contentType: XML, summary: 'Recording ready',
    response: { 200: null, 400: Type.String(), 403: Type.String() }, handler: req => handlersOf(req.services).recording(req) }),
  route({ ...common, method: 'POST', path: '/v1/webhooks/cpaas/sms', summary: 'Inbound SMS or delivery status: answers {ok:true}',
    contentType: 'application/json; charset=utf-8',
    response: { 200: Type.Object({ ok: Type.Boolean() }), 400: Type.Object({ ok: Type.Boolean() }), 403: Type.Object({ ok: Type.Boolean() }) },
    handler: req => handlersOf(req.services).sms(req) }),
]
