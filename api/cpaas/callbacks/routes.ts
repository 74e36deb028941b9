// Contract 4.10: the provider's callbacks. No JWT: each route is `signed`, so the pipeline checks the
// provider's signature on the raw body before the handler runs (contract D5). Not rate-limited per
// tenant (they are not API calls). The handlers, one a module beside this file, are bound by handlers.ts.
import { Type } from '@sinclair/typebox'
import { route, type ApiReply, type ApiRequest, type RouteDef } from '../../route.js'
import { EMPTY_RESPONSE } from '../telnyx/texml.js'

export interface CallbackHandlers {
  voice(req: ApiRequest): ApiReply | Promise<ApiReply>
  voiceStatus(req: ApiRequest): ApiReply
  dialStatus(req: ApiRequest): ApiReply
  recording(req: ApiRequest): ApiReply
  sms(req: ApiRequest): Promise<ApiReply>
}

const XML = 'application/xml'
const JSON_TYPE = 'application/json; charset=utf-8'
const xmlRefusal: ApiReply = { status: 403, body: EMPTY_RESPONSE, contentType: XML }
const common = { auth: 'none', rawBody: true, rateLimit: false, bodyLimit: 64 * 1024, problems: [] } as const
const voice = (name: string) => ({ ...common, form: true, contentType: XML, signed: { refusal: xmlRefusal, name } })
const Ok = Type.Object({ ok: Type.Boolean() })

export function cpaasRoutes(t: CallbackHandlers): RouteDef[] {
  return [
    route({ ...voice('voice'), method: 'POST', path: '/v1/webhooks/cpaas/voice', summary: 'Inbound call: answers TeXML',
      response: { 200: Type.String(), 400: Type.String(), 403: Type.String() }, handler: req => t.voice(req) }),
    route({ ...voice('voice/status'), method: 'POST', path: '/v1/webhooks/cpaas/voice/status', summary: 'Call leg status',
      response: { 200: null, 400: Type.String(), 403: Type.String() }, handler: req => t.voiceStatus(req) }),
    route({ ...voice('voice/dial-status'), method: 'POST', path: '/v1/webhooks/cpaas/voice/dial-status', summary: 'Dial outcome: answers Hangup',
      response: { 200: Type.String(), 400: Type.String(), 403: Type.String() }, handler: req => t.dialStatus(req) }),
    route({ ...voice('voice/recording'), method: 'POST', path: '/v1/webhooks/cpaas/voice/recording', summary: 'Recording ready',
      response: { 200: null, 400: Type.String(), 403: Type.String() }, handler: req => t.recording(req) }),
    route({
      ...common, method: 'POST', path: '/v1/webhooks/cpaas/sms', contentType: JSON_TYPE,
      signed: { refusal: { status: 403, body: '{"ok":false}', contentType: JSON_TYPE }, name: 'sms' },
      summary: 'Inbound SMS or delivery status: answers {ok:true} once the forward is handed to the provider, 503 + Retry-After when it cannot be in time. ' +
        'STOP, STOPALL, UNSUBSCRIBE, CANCEL, END, QUIT (whole message, any case) opt the sender out of SMS from the proxy and get one confirmation; ' +
        'START, UNSTOP opt back in; HELP, INFO get the tenant help text; none is forwarded (issue #16)',
      response: { 200: Ok, 400: Ok, 403: Ok, 503: Ok },
      handler: req => t.sms(req),
    }),
  ]
}
