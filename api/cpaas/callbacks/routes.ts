// Contract 4.10: the provider's callbacks, one set a provider under its dialect's prefix
// (/v1/webhooks/cpaas for Telnyx and the sandbox, /v1/webhooks/twilio for Twilio). No JWT: each
// route is `signed`, so the pipeline checks the provider's signature on the raw body before the
// handler runs (contract D5). Not rate-limited per tenant (they are not API calls). The handlers,
// one a module beside this file, are bound by handlers.ts.
import { Type } from '@sinclair/typebox'
import { route, type ApiReply, type ApiRequest, type RouteDef } from '../../route.js'
import type { Dialect } from '../dialect.js'
import { EMPTY_RESPONSE, TELNYX_DIALECT } from '../telnyx/texml.js'

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
const jsonRefusal: ApiReply = { status: 403, body: '{"ok":false}', contentType: JSON_TYPE }
const common = { auth: 'none', rawBody: true, rateLimit: false, bodyLimit: 64 * 1024, problems: [] } as const
const Ok = Type.Object({ ok: Type.Boolean() })

export function cpaasRoutes(t: CallbackHandlers, dialect: Dialect = TELNYX_DIALECT): RouteDef[] {
  const base = dialect.prefix
  // The Telnyx routes keep their historic names in logs ('voice', 'sms'); another provider's are prefixed.
  const named = (name: string) => dialect === TELNYX_DIALECT ? name : `${dialect.provider}/${name}`
  const voice = (name: string) => ({ ...common, form: true, contentType: XML, signed: { refusal: xmlRefusal, name: named(name) } })
  const answers = dialect.smsAnswer === 'xml' ? Type.String() : Ok
  const lang = dialect.smsAnswer === 'xml' ? 'TwiML' : 'TeXML'
  return [
    route({ ...voice('voice'), method: 'POST', path: `${base}/voice`, summary: `Inbound call: answers ${lang}`,
      response: { 200: Type.String(), 400: Type.String(), 403: Type.String() }, handler: req => t.voice(req) }),
    route({ ...voice('voice/status'), method: 'POST', path: `${base}/voice/status`, summary: 'Call leg status',
      response: { 200: null, 400: Type.String(), 403: Type.String() }, handler: req => t.voiceStatus(req) }),
    route({ ...voice('voice/dial-status'), method: 'POST', path: `${base}/voice/dial-status`, summary: 'Dial outcome: answers Hangup',
      response: { 200: Type.String(), 400: Type.String(), 403: Type.String() }, handler: req => t.dialStatus(req) }),
    route({ ...voice('voice/recording'), method: 'POST', path: `${base}/voice/recording`, summary: 'Recording ready',
      response: { 200: null, 400: Type.String(), 403: Type.String() }, handler: req => t.recording(req) }),
    route({
      ...common, method: 'POST', path: `${base}/sms`, contentType: dialect.smsAnswer === 'xml' ? XML : JSON_TYPE,
      signed: { refusal: dialect.smsAnswer === 'xml' ? xmlRefusal : jsonRefusal, name: named('sms') },
      summary: (dialect.smsAnswer === 'xml'
        ? 'Inbound SMS or delivery status: answers an empty TwiML <Response/> once the forward is handed to the provider, 503 + Retry-After when it cannot be in time. '
        : 'Inbound SMS or delivery status: answers {ok:true} once the forward is handed to the provider, 503 + Retry-After when it cannot be in time. ') +
        'STOP, STOPALL, UNSUBSCRIBE, CANCEL, END, QUIT (whole message, any case) opt the sender out of SMS from the proxy and get one confirmation; ' +
        'START, UNSTOP opt back in; HELP, INFO get the tenant help text; none is forwarded (issue #16)',
      response: { 200: answers, 400: answers, 403: answers, 503: answers },
      handler: req => t.sms(req),
    }),
  ]
}
