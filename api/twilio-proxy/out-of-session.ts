// A Service's out_of_session_callback_url (docs/twilio-proxy.md, Callbacks): a call or SMS to one of
// its numbers from someone with no session there is POSTed to it (the caller's number and the
// number dialled, as Twilio Proxy sends them; never a message text). Its answer decides:
// - application/json with `participantIdentifier`: a session is created (the caller the first
//   participant, on the number they dialled; `participantIdentifier` the second, on
//   `participantProxyIdentifier` or a number the Service picks), through the same code as
//   POST /Sessions, and the traffic is routed again;
// - TwiML (application/xml, text/xml): a call is answered with it (TeXML takes TwiML's basic verbs);
// - anything else, an error or no answer within the bound: what a number without a session does.
// Which numbers have such a URL is kept in memory: no other call or SMS waits for it.
import type { Logger } from 'pino'
import type { Services } from '../services.js'
import { accountOfTenant } from '../../sql/twilio-proxy.js'
import { outOfSessionNumbers } from '../../sql/twilio-proxy-callbacks.js'
import { encodeForm } from '../cpaas/form.js'
import type { Ctx, FacadeDeps } from './context.js'
import { signedForm, type CallbackParams } from './callback-params.js'
import { tokenCipher } from './credentials.js'
import { TwilioError } from './errors.js'
import type { FormPost } from './intercept.js'
import { Params } from './params.js'
import { numberSid, serviceSid } from './serialize.js'
import { sessionRoutes } from './session-routes.js'

export type OutOfSessionAnswer = { kind: 'created' } | { kind: 'twiml'; body: string } | { kind: 'none' }

export interface OutOfSession {
  /** undefined: the number has no out-of-session URL. */
  check(q: { channel: 'voice' | 'sms'; from: string; to: string; providerId: string; now: number }): Promise<OutOfSessionAnswer> | undefined
  reload(): Promise<void>
}

const MAX_ANSWER = 64 * 1024
const createSession = sessionRoutes.find(([pattern]) => pattern === 'Services/*/Sessions')![1].POST!

export function createOutOfSession(o: {
  services: Services; deps: FacadeDeps; post: FormPost; log: Pick<Logger, 'warn' | 'error'>; timeoutMs: number
}): OutOfSession {
  const cipher = tokenCipher(o.services.phoneKey)
  let numbers = new Map<string, { serviceId: string; tenantId: string; url: string }>()
  let started = 0, applied = 0

  async function reload(): Promise<void> {
    const mine = ++started
    try {
      const rows = await outOfSessionNumbers(o.services.db)
      if (mine > applied) { applied = mine; numbers = new Map(rows.map(r => [r.number, { serviceId: r.service_id, tenantId: r.tenant_id, url: r.url }])) }
    } catch (err) {
      o.log.error({ code: 'twilio-out-of-session', error: err }, 'out-of-session numbers not reloaded')
    }
  }

  async function ask(n: { serviceId: string; tenantId: string; url: string }, q: Parameters<OutOfSession['check']>[0]): Promise<OutOfSessionAnswer> {
    const account = await accountOfTenant(o.services.db, n.tenantId)
    if (!account) return { kind: 'none' }
    const params: CallbackParams = {
      inboundParticipantIdentifier: q.from, inboundParticipantProxyIdentifier: q.to, inboundParticipantProxyIdentifierSid: numberSid(q.to),
      inboundParticipantAccountSid: account.sid, inboundParticipantServiceSid: serviceSid(n.serviceId),
      AccountSid: account.sid, ApiVersion: '2010-04-01', From: q.from, To: q.to, Direction: 'inbound',
      ...(q.channel === 'voice'
        ? { CallSid: q.providerId, CallStatus: 'ringing', Caller: q.from, Called: q.to }
        : { MessageSid: q.providerId, SmsSid: q.providerId, SmsMessageSid: q.providerId, SmsStatus: 'received', NumMedia: '0' }),
    }
    const res = await o.post({ url: n.url, ...signedForm(cipher.decrypt(account.tokenEnc), n.url, params), timeoutMs: o.timeoutMs, readBody: MAX_ANSWER })
    if (res.statusCode < 200 || res.statusCode >= 300) return { kind: 'none' }
    const type = (res.contentType ?? '').split(';')[0]!.trim().toLowerCase()
    if (type === 'application/xml' || type === 'text/xml') return q.channel === 'voice' ? { kind: 'twiml', body: res.body ?? '' } : { kind: 'none' }
    if (type !== 'application/json') return { kind: 'none' }
    return await autoCreate(n, account.sid, q, JSON.parse(res.body ?? '') as Record<string, unknown>)
  }

  /** The answer's session, made as POST /Services/{sid}/Sessions makes one. */
  async function autoCreate(n: { serviceId: string; tenantId: string }, accountSid: string, q: { from: string; to: string; now: number }, j: Record<string, unknown>): Promise<OutOfSessionAnswer> {
    const str = (k: string) => (typeof j[k] === 'string' ? j[k] as string : typeof j[k] === 'number' ? String(j[k]) : undefined)
    const second = str('participantIdentifier')
    if (!second) return { kind: 'none' }
    const meta = await o.services.authenticator.tenant(n.tenantId)
    if (!meta || meta.status !== 'ACTIVE') return { kind: 'none' }
    const proxy = str('participantProxyIdentifier')
    const form = encodeForm([
      ...(['uniqueName', 'mode', 'ttl', 'dateExpiry'] as const).flatMap(k => { const v = str(k); return v === undefined ? [] : [[k[0]!.toUpperCase() + k.slice(1), v] as const] }),
      ['Participants', JSON.stringify({ Identifier: q.from, ProxyIdentifier: q.to })],
      ['Participants', JSON.stringify(proxy ? { Identifier: second, ProxyIdentifier: proxy } : { Identifier: second })],
    ])
    const base = `${o.deps.configuredBaseUrl() ?? o.services.config.publicBaseUrl}/proxy/v1`
    const path = `/v1/Services/${serviceSid(n.serviceId)}/Sessions`
    const c: Ctx = {
      services: o.services, deps: o.deps, auth: { tenantId: n.tenantId, accountSid, tier: meta.tier, salt: meta.salt },
      params: Params.parse(form), base, path, now: q.now, segs: ['Services', serviceSid(n.serviceId), 'Sessions'],
    }
    try {
      await createSession(c)
    } catch (err) {
      if (!(err instanceof TwilioError)) throw err
      o.log.warn({ code: 'twilio-out-of-session', status: err.status, twilioCode: err.twilioCode }, 'out-of-session auto-create refused')
      return { kind: 'none' }
    }
    await o.deps.changed?.(n.serviceId)
    return { kind: 'created' }
  }

  return {
    check(q) {
      const n = numbers.get(q.to)
      if (!n) return undefined
      return ask(n, q).catch((err: unknown) => {
        o.log.warn({ code: 'twilio-out-of-session', error: err }, 'out-of-session callback failed')
        return { kind: 'none' as const }
      })
    },
    reload,
  }
}
