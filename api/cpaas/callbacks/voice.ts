// POST /v1/webhooks/{cpaas,twilio}/voice, the voice fetch (contract 4.10): routes in the engine and
// answers in the provider's dialect (TeXML or TwiML) from memory; its call record is queued behind the answer (sql/record-writer.ts:
// journaled, group-committed, retried through Postgres outages).
import type { LiveView, RouteDecision } from '../../../engine/index.js'
import type { ApiReply, ApiRequest } from '../../route.js'
import { uuidv7 } from '../../../sql/vocabulary/ids.js'
import { CALL_START } from '../../../sql/records.js'
import { rejectTexml } from '../telnyx/texml.js'
import { BAD_VOICE, callRow, matched, OUTCOME, XML, type CallbackContext, type Matched } from './context.js'

/** The fetch's record; its call.incoming (and call.failed) are made from it when it is applied. */
function recordCallStart(ctx: CallbackContext, dec: Matched, caller: string, proxy: string, callId: string, callSid: string, now: number, live: LiveView | undefined) {
  const { d } = ctx
  const row = callRow(ctx, dec, caller, dec.direction, proxy, callId, callSid, now, live)
  const settled = () => d.callCounter.settled(callId)
  // contract D5: a call against the direction mode is rejected and recorded as FAILED; so is
  // one on a session that carries SMS only (contract D10).
  const recorded = dec.kind === 'connect' ? row : { ...row, status: 'FAILED' as const, endedAt: now }
  d.records.upsertCall(recorded, CALL_START).then(settled, settled)
}

export function voice(ctx: CallbackContext, req: ApiRequest): ApiReply | Promise<ApiReply> {
  const { d } = ctx
  const f = req.form
  const callSid = f?.['CallSid'], from = f?.['From'], to = f?.['To']
  if (!callSid || !from || !to) return BAD_VOICE
  const now = d.now()
  const dec = d.engine.route(to, from, now)
  // A Twilio Proxy Service's out-of-session callback may answer a caller with no session, or
  // create one, which is then routed once more as any other (api/twilio-proxy/out-of-session.ts).
  const oos = dec.kind === 'no-session' ? d.outOfSession?.check({ channel: 'voice', from, to, providerId: callSid, now }) : undefined
  if (oos) {
    return oos.then(r => {
      if (r.kind !== 'twiml') return route(ctx, r.kind === 'created' ? d.engine.route(to, from, now) : dec, callSid, from, to, now)
      d.countCallback?.('voice', OUTCOME[dec.kind])
      return { status: 200, body: r.body, contentType: XML }
    })
  }
  return route(ctx, dec, callSid, from, to, now)
}

/** A routing decision answered, once a Twilio Proxy Service's intercept callback (if any) let it through. */
function route(ctx: CallbackContext, dec: RouteDecision, callSid: string, from: string, to: string, now: number): ApiReply | Promise<ApiReply> {
  ctx.d.countCallback?.('voice', OUTCOME[dec.kind])
  const held = dec.kind === 'connect' && !ctx.calls.get(callSid) ? intercepted(ctx, dec, callSid, now) : undefined
  if (held) return held.then(id => id !== null ? answer(ctx, dec, callSid, from, to, now, id) : { status: 200, body: rejectTexml('rejected'), contentType: XML })
  return answer(ctx, dec, callSid, from, to, now)
}

/** The call's id (its interaction's) once the intercept callback let it through; null: blocked. Undefined: none to ask. */
function intercepted(ctx: CallbackContext, dec: Extract<RouteDecision, { kind: 'connect' }>, callSid: string, now: number): Promise<string | null> | undefined {
  if (!ctx.d.intercept?.has(dec.sessionId)) return undefined
  const id = uuidv7(now)
  return ctx.d.intercept.check(dec, 'call', id, callSid, now)?.then(go => (go ? id : null))
}

function answer(ctx: CallbackContext, dec: RouteDecision, callSid: string, from: string, to: string, now: number, newId?: string): ApiReply {
  const { d, calls, dialect } = ctx
  if (matched(dec)) {
    let callId = calls.get(callSid)
    if (callId === undefined) {
      const id = callId = newId ?? uuidv7(now)
      calls.set(callSid, id)
      // One lookup of the session for its count and its party-B hash (at 1M sessions each is a cache miss).
      const live = d.engine.live(dec.sessionId)
      d.callCounter.routed(live, id, now)
      setImmediate(() => recordCallStart(ctx, dec, from, to, id, callSid, now, live))
    }
    if (dec.kind === 'connect') return { status: 200, body: dialect.answer(dec, { baseUrl: d.publicBaseUrl(), callId }), contentType: XML }
  }
  return { status: 200, body: dialect.answer(dec, { baseUrl: d.publicBaseUrl() }), contentType: XML }
}
