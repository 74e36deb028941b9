// A Twilio Proxy Service's callback_url as a target of the webhook dispatcher (docs/twilio-proxy.md,
// Callbacks): a call.* or sms.* event of a native session behind a façade session whose Service
// has a callback_url also goes there, as the Interaction's form, signed with the account's auth
// token. Same outbox, same retries; webhook_deliveries records each URL's attempts.
import type { DatabasePool } from 'slonik'
import type { Logger } from 'pino'
import { CALLBACK_EVENTS, facadeOfNative, facadeOfSession, INTERACTION_CALLBACK } from '../../sql/twilio-proxy-callbacks.js'
import { getInteraction } from '../../sql/twilio-proxy-interactions.js'
import type { OutboxEvent } from '../../sql/webhooks.js'
import { interactionParams, signedForm } from '../../api/twilio-proxy/callback-params.js'
import { tokenCipher } from '../../api/twilio-proxy/credentials.js'
import { createIntercept, type Intercept } from '../../api/twilio-proxy/intercept.js'
import { createOutOfSession, type OutOfSession as BaseOutOfSession } from '../../api/twilio-proxy/out-of-session.js'
import type { FacadeDeps } from '../../api/twilio-proxy/context.js'
import type { Services } from '../../api/services.js'
import type { DeliveryTarget } from './dispatcher.js'
import { createHttpTransport } from './transport.js'

export function facadeCallbackTargets(pool: DatabasePool, phoneKey: Buffer): (ev: OutboxEvent) => Promise<DeliveryTarget[]> {
  const cipher = tokenCipher(phoneKey)
  return async ev => {
    const mine = ev.type === INTERACTION_CALLBACK // a MessageInteraction: its façade session and interaction
    if (!ev.sessionId || !(mine || CALLBACK_EVENTS.has(ev.type))) return []
    const data = ev.envelope.data as { callId?: string; smsId?: string; interactionId?: string } | undefined
    const recordId = mine ? data?.interactionId : data?.callId ?? data?.smsId
    if (typeof recordId !== 'string') return []
    const f = mine ? await facadeOfSession(pool, ev.sessionId) : await facadeOfNative(pool, ev.sessionId)
    if (!f?.callbackUrl) return []
    const row = await getInteraction(pool, f.sessionId, recordId)
    if (!row) return [] // deleted through the façade, or its session is gone
    const url = f.callbackUrl
    const params = interactionParams(f.accountSid, f.serviceId, row)
    return [{ url, sign: () => signedForm(cipher.decrypt(f.tokenEnc), url, params) }]
  }
}

/** The intercept callback (api/twilio-proxy/intercept.ts) over the webhook transport and its SSRF guard. */
export function facadeIntercept(o: { pool: DatabasePool; phoneKey: Buffer; allowInsecure: boolean; timeoutMs: number; log: Pick<Logger, 'warn' | 'error'> }): Intercept {
  const transport = createHttpTransport({ allowInsecure: o.allowInsecure, userAgent: 'maskline-twilio-proxy/1' })
  const intercept = createIntercept({ db: o.pool, phoneKey: o.phoneKey, post: transport, log: o.log, timeoutMs: o.timeoutMs })
  return { ...intercept, close: () => { intercept.close(); transport.close() } }
}

export type OutOfSession = BaseOutOfSession & { close(): void }

/** The out-of-session callback (api/twilio-proxy/out-of-session.ts), read again every 5 s for other nodes' changes. */
export function facadeOutOfSession(o: { services: Services; deps: FacadeDeps; allowInsecure: boolean; timeoutMs: number; log: Pick<Logger, 'warn' | 'error'> }): OutOfSession {
  const transport = createHttpTransport({ allowInsecure: o.allowInsecure, userAgent: 'maskline-twilio-proxy/1' })
  const oos = createOutOfSession({ services: o.services, deps: o.deps, post: transport, log: o.log, timeoutMs: o.timeoutMs })
  const timer = setInterval(() => void oos.reload(), 5_000)
  timer.unref()
  return { ...oos, close: () => { clearInterval(timer); transport.close() } }
}
