// POST /v1/webhooks/{cpaas,twilio}/sms: an inbound message or a delivery status. An inbound message is
// answered 200 only once its forward has been handed to the provider (or it was dropped, or
// forwarded before), within the provider's 2 s budget; otherwise 503 with Retry-After, and the
// provider's retry (same message id) never forwards twice. Keywords and opt-outs (issue #16) are
// decided by the SMS compliance (../sms/compliance.ts).
import type { SmsStatus } from '../../../engine/types.js'
import type { ApiReply, ApiRequest } from '../../route.js'
import { orAfter } from '../../app/deadline.js'
import { parseSmsCallback } from '../sms-payload.js'
import { EMPTY_RESPONSE } from '../telnyx/texml.js'
import { JSON_TYPE, OUTCOME, XML, type CallbackContext } from './context.js'
import { blockChannel, interceptThenForward } from './sms-forward.js'

const SMS_STATUS_RETRY_MS = [1_000, 5_000]
const SMS_BUDGET_MS = 1_500
const SMS_RETRY_AFTER_S = '5'

// The answers, in the dialect's form: Telnyx reads JSON; Twilio reads TwiML, and an empty
// <Response/> sends nothing back to the sender.
const ANSWERS = {
  json: {
    ok: { status: 200, body: '{"ok":true}', contentType: JSON_TYPE },
    bad: { status: 400, body: '{"ok":false}', contentType: JSON_TYPE },
    retryLater: { status: 503, body: '{"ok":false}', contentType: JSON_TYPE, headers: { 'retry-after': SMS_RETRY_AFTER_S } },
  },
  xml: {
    ok: { status: 200, body: EMPTY_RESPONSE, contentType: XML },
    bad: { status: 400, body: EMPTY_RESPONSE, contentType: XML },
    retryLater: { status: 503, body: EMPTY_RESPONSE, contentType: XML, headers: { 'retry-after': SMS_RETRY_AFTER_S } },
  },
} satisfies Record<string, Record<string, ApiReply>>

/**
 * A delivery status for a forwarded message. The provider may report it before our send has
 * stored the forwarded message's id (the send's answer and the status webhook race): a status
 * that matched nothing is tried again after 1 s and 5 s. A status never moves backwards, so a
 * retry of one that was merely stale changes nothing.
 */
function smsStatus(ctx: CallbackContext, forwardId: string, status: SmsStatus, deliveredAt: number | null, attempt: number): void {
  void ctx.d.records.updateSmsStatusByForwardId(forwardId, status, deliveredAt).then(hit => {
    const wait = SMS_STATUS_RETRY_MS[attempt]
    if (!hit && wait !== undefined) setTimeout(() => smsStatus(ctx, forwardId, status, deliveredAt, attempt + 1), wait).unref()
  })
}

export async function sms(ctx: CallbackContext, req: ApiRequest): Promise<ApiReply> {
  const { d, forwarded, forwarding } = ctx
  const { ok, bad, retryLater } = ANSWERS[ctx.dialect.smsAnswer]
  const cb = parseSmsCallback(req.headers['content-type'], req.rawBody ?? '')
  if (cb.kind === 'invalid') return bad
  if (cb.kind === 'status') {
    smsStatus(ctx, cb.messageId, cb.status, cb.status === 'DELIVERED' ? d.now() : null, 0)
    return ok
  }
  if (cb.kind === 'ignored' || forwarded.get(cb.messageId)) return ok
  const now = d.now()
  let dec = d.engine.route(cb.to, cb.from, now, 'sms')
  // A Twilio Proxy Service's out-of-session callback may create the session (api/twilio-proxy/out-of-session.ts).
  const oos = dec.kind === 'no-session' ? d.outOfSession?.check({ channel: 'sms', from: cb.from, to: cb.to, providerId: cb.messageId, now }) : undefined
  if (oos && (await oos).kind === 'created') dec = d.engine.route(cb.to, cb.from, now, 'sms')
  d.countCallback?.('sms', OUTCOME[dec.kind])
  // Issue #16: the inactivity clock counts every SMS that is recorded (not one the direction drops).
  if (dec.kind === 'connect' || dec.kind === 'channel-not-allowed') d.engine.live(dec.sessionId)?.noteActivity(now)
  // Issue #16: keywords and opt-outs, decided from memory. Without them: not matched or
  // direction not allowed is dropped, no record (contract D5).
  const action = d.smsCompliance ? d.smsCompliance.action(dec, { proxy: cb.to, from: cb.from, text: cb.text }) : dec.kind === 'connect' ? { kind: 'forward' as const, decision: dec } : { kind: 'drop' as const }
  // Issue #16: a message the session does not carry (voice only) is blocked, and recorded.
  const offChannel = dec.kind === 'channel-not-allowed' ? dec : null
  if (action.kind === 'drop' && offChannel === null) return ok
  let run = forwarding.get(cb.messageId)
  if (!run) {
    const messageId = cb.messageId
    const work = action.kind === 'forward'
      ? interceptThenForward(ctx, action.decision, cb.to, messageId, cb.text, now)
      : action.kind === 'drop' ? blockChannel(ctx, offChannel!, cb.to, messageId, now)
      : d.smsCompliance!.run(action, { proxy: cb.to, from: cb.from, text: cb.text, messageId, at: now })
    run = work.catch(err => {
      d.log.error({ code: 'sms-forward', error: err }, 'sms forward crashed')
      return 'retry' as const
    }).then(outcome => {
      forwarding.delete(messageId)
      if (outcome === 'done') forwarded.set(messageId, true)
      return outcome
    })
    forwarding.set(messageId, run)
  }
  return await orAfter(run, d.smsBudgetMs ?? SMS_BUDGET_MS, 'late') === 'done' ? ok : retryLater
}
