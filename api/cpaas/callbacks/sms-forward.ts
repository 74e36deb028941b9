// What the SMS callback (sms.ts) does with an inbound message that matched a session: forward it,
// once, or record it blocked. Each returns 'done' once the outcome is on disk (journal), or
// 'retry' when the provider must ask again.
import type { RouteDecision } from '../../../engine/index.js'
import type { SmsStatus } from '../../../engine/types.js'
import { newEnvelope as event } from '../../../sql/vocabulary/event-envelope.js'
import { uuidv7 } from '../../../sql/vocabulary/ids.js'
import { toProviderError } from '../provider.js'
import type { SmsOutcome } from '../sms/compliance.js'
import type { CallbackContext } from './context.js'

export const SMS_PATH = '/v1/webhooks/cpaas/sms'

/**
 * One inbound message, forwarded at most once per outcome: the QUEUED record is the claim (the
 * provider's message id is its key); a claim found already forwarded is done; the forward's
 * outcome is on disk (journal) before the answer says it was handed over.
 */
export async function forwardOnce({ d }: CallbackContext, dec: Extract<RouteDecision, { kind: 'connect' }>, proxy: string, messageId: string, text: string, now: number, id = uuidv7(now)): Promise<SmsOutcome> {
  const base = { sessionId: dec.sessionId, tenantId: dec.tenantId, proxyNumber: proxy, direction: dec.direction }
  const claim = await d.records.upsertSms({
    id, sessionId: dec.sessionId, tenantId: dec.tenantId, providerMessageId: messageId,
    direction: dec.direction, status: 'QUEUED', sentAt: now,
  }, {
    events: [event('sms.received', now, { ...base, smsId: id, status: 'QUEUED' })],
    usage: [{ tenantId: dec.tenantId, metric: 'sms_received', quantity: 1, at: now, sessionId: dec.sessionId, dedupeKey: `sms_received:${id}` }],
  })
  if (!claim) return 'retry' // refused or not applied in time: the provider asks again
  // Found already forwarded (a retry of a message answered before a restart): done. Found still
  // QUEUED: an earlier attempt never handed it over (or died not knowing): forward it now.
  if (claim.status !== 'QUEUED') return 'done'
  const smsId = claim.id
  let outcome: { forwardId: string | null; status: SmsStatus; at: number; code?: string }
  try {
    // From the recipient's own proxy: the one texted, unless the session is dual-proxy (docs/dual-proxy.md).
    const sent = await d.provider.sendSms({ from: dec.callerId, to: dec.to, text, webhookUrl: d.publicBaseUrl() + SMS_PATH })
    outcome = { forwardId: sent.providerMessageId, status: d.sandbox ? 'DELIVERED' : 'SENT', at: d.now() }
  } catch (err) {
    const e = toProviderError(err)
    // Nothing was handed over (refused before sending, provider down): the provider retries.
    // Refused for this message itself, or maybe sent (a timeout): resending could deliver it
    // twice, which is worse in a masked conversation than one message reported FAILED.
    if (e.providerFault && !e.ambiguous) {
      d.log.warn({ code: e.code, smsId }, 'sms forward not handed over; provider asked to retry')
      return 'retry'
    }
    d.log.warn({ code: e.code, smsId }, 'sms forward failed')
    outcome = { forwardId: null, status: 'FAILED', at: d.now(), code: e.code }
  }
  void d.records.markSmsForwarded(smsId, outcome.forwardId, outcome.status, outcome.at, outcome.status === 'FAILED' ? {} : {
    events: [event('sms.sent', outcome.at, { ...base, smsId, status: outcome.status })],
    usage: [{ tenantId: dec.tenantId, metric: 'sms_sent', quantity: 1, at: outcome.at, sessionId: dec.sessionId, dedupeKey: `sms_sent:${smsId}` }],
  })
  await d.records.sync()
  return 'done'
}

/**
 * Issue #16: an SMS on a session that carries voice only is not forwarded: recorded FAILED with
 * reason `channel` (it matched a session, unlike the unmatched messages contract D5 drops without
 * a record; the record also keeps a provider retry from reporting it twice) and reported by
 * sms.blocked. No usage: nothing was sent.
 */
export async function blockChannel({ d }: CallbackContext, dec: Extract<RouteDecision, { kind: 'channel-not-allowed' }>, proxy: string, messageId: string, now: number): Promise<SmsOutcome> {
  const id = uuidv7(now)
  const claim = await d.records.upsertSms({
    id, sessionId: dec.sessionId, tenantId: dec.tenantId, providerMessageId: messageId,
    direction: dec.direction, status: 'FAILED', sentAt: now, reason: 'channel',
  }, {
    events: [event('sms.blocked', now, {
      sessionId: dec.sessionId, tenantId: dec.tenantId, proxyNumber: proxy, direction: dec.direction, smsId: id, status: 'FAILED', reason: 'channel',
    })],
  })
  if (!claim) return 'retry'
  await d.records.sync()
  return 'done'
}

/** forwardOnce, unless a Twilio Proxy Service's intercept callback blocks it (not forwarded, not recorded). */
export async function interceptThenForward(ctx: CallbackContext, dec: Extract<RouteDecision, { kind: 'connect' }>, proxy: string, messageId: string, text: string, now: number): Promise<SmsOutcome> {
  const id = uuidv7(now)
  const held = ctx.d.intercept?.check(dec, 'sms', id, messageId, now)
  return held && !await held ? 'done' : forwardOnce(ctx, dec, proxy, messageId, text, now, id)
}
