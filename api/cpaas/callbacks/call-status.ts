// What the two call-status callbacks share (status.ts, dial-status.ts): they queue what they were
// told and answer at once; the record writer applies it against the call's state when its batch
// commits. A callback for a call whose record was lost (a crash between the voice fetch's answer
// and the journal) carries what the fetch knew, so the record is rebuilt with its final status
// (contract D5).
import type { CallDirection } from '../../../engine/types.js'
import { parseDurationSeconds } from '../../../engine/call-status.js'
import type { ApiReply, ApiRequest } from '../../route.js'
import { uuidv7 } from '../../../sql/vocabulary/ids.js'
import type { CallCallback, CallInsert } from '../../../sql/records.js'
import type { FormFields } from '../form.js'
import { hangupTexml } from '../telnyx/texml.js'
import { BAD_VOICE, callRow, matched, UUID_RE, uuidTime, XML, type CallbackContext } from './context.js'

/**
 * What the voice fetch would have recorded for this call, from a later callback: the session is
 * found as at the fetch, by proxy and party. The parent call's callbacks (dial-status, the
 * application's status) carry the caller in From and the proxy in To; the dialed leg's status
 * carries the proxy in From and the called party in To, so its direction is the reverse.
 */
function rebuild(ctx: CallbackContext, callId: string, f: FormFields, leg: 'parent' | 'child', now: number): CallInsert | undefined {
  const from = f['From'], to = f['To']
  const callSid = leg === 'child' ? f['ParentCallSid'] : f['CallSid']
  // A call this process routed had its record queued here: nothing to rebuild.
  if (!from || !to || !callSid || ctx.calls.get(callSid) !== undefined) return undefined
  const [proxy, party] = leg === 'parent' ? [to, from] : [from, to]
  const dec = ctx.d.engine.route(proxy, party, now)
  if (!matched(dec)) return undefined
  const reversed: CallDirection = dec.direction === 'A_TO_B' ? 'B_TO_A' : 'A_TO_B'
  const direction = leg === 'parent' ? dec.direction : reversed
  const at = UUID_RE.test(callId) ? Math.min(now, uuidTime(callId)) : now
  const row = callRow(ctx, dec, party, direction, proxy, callId, callSid, at)
  return { ...row, recordingConsentPlayed: false }
}

/** A call leg's status (`status`) or the dial's outcome (`dial-status`), queued for the record writer. */
export function callStatus(ctx: CallbackContext, req: ApiRequest, source: 'status' | 'dial-status'): ApiReply {
  const { d } = ctx
  const done: ApiReply = source === 'status' ? { status: 200 } : { status: 200, body: hangupTexml(), contentType: XML }
  const f = req.form
  const queryId = new URLSearchParams(req.rawQuery).get('callId')
  const value = source === 'status' ? f?.['CallStatus'] : f?.['DialCallStatus']
  if (!f || !value) return BAD_VOICE
  const now = d.now()
  const duration = parseDurationSeconds(source === 'status' ? f['CallDuration'] : f['DialCallDuration'])
  const common = { value, at: now, ...(duration !== undefined ? { duration } : {}) }
  let cb: CallCallback
  if (queryId) {
    if (!UUID_RE.test(queryId)) return done // not a call of ours: nothing to change
    const rebuilt = rebuild(ctx, queryId, f, source === 'status' ? 'child' : 'parent', now)
    cb = {
      key: { callId: queryId }, source, ...common,
      ...(source === 'dial-status' && f['RecordingUrl'] ? { recordingUrl: f['RecordingUrl'] } : {}),
      ...(rebuilt ? { rebuild: rebuilt } : {}),
    }
  } else if (source === 'status' && f['CallSid']) {
    // No callId: the TeXML application's own status callback, reporting the parent (inbound)
    // call by its CallSid.
    const rebuilt = rebuild(ctx, uuidv7(now), f, 'parent', now)
    cb = { key: { providerCallId: f['CallSid'] }, source: 'parent-status', ...common, ...(rebuilt ? { rebuild: rebuilt } : {}) }
  } else {
    return BAD_VOICE
  }
  void d.records.callEvent(cb)
  return done
}
