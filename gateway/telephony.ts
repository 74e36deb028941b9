// Provider callbacks (spec 4.10, DECISIONS 5). Every answer comes from memory:
// - the voice fetch routes in the engine and answers TeXML; its call record is queued behind the
//   answer (sql/record-writer.ts: journaled, group-committed, retried through Postgres outages);
// - status, dial-status and recording callbacks queue what they were told and answer at once; the
//   writer applies them against the call's state when their batch commits. A callback for a call
//   whose record was lost (a crash between the answer and the journal) carries what the fetch
//   knew, so the record is rebuilt with its final status (issue 18);
// - an inbound SMS is answered 200 only once its forward has been handed to the provider (or it
//   was dropped, or forwarded before), within the provider's 2 s budget; otherwise 503 with
//   Retry-After, and the provider's retry (same message id) never forwards twice.
// Signatures are checked by the HTTP pipeline before a handler runs (RouteDef.signed).
// No phone number or SMS text is ever logged or put into an event.
import type { Logger } from 'pino'
import type { Engine, LiveView, RouteDecision } from '../engine/index.js'
import type { CallDirection, SmsStatus } from '../engine/types.js'
import type { ApiReply, ApiRequest } from '../api/route.js'
import type { CallbackHandlers } from '../api/routes/cpaas.js'
import { newEnvelope as event } from '../api/vocabulary/event-envelope.js'
import { uuidv7 } from '../api/vocabulary/ids.js'
import { Recent } from '../engine/recent.js'
import type { FormFields } from '../api/cpaas/form.js'
import { decisionTexml, EMPTY_RESPONSE, hangupTexml } from '../api/cpaas/texml.js'
import { parseDurationSeconds } from '../engine/call-status.js'
import { parseSmsCallback } from '../api/cpaas/sms-payload.js'
import { toProviderError, type SmsProvider } from './cpaas/provider.js'
import { orAfter } from './deadline.js'
import { CALL_START, type CallCallback, type CallInsert, type RecordWriter } from '../sql/records.js'
import type { CallCounter } from './call-counter.js'
import type { TenantDirectory } from './tenant-directory.js'
import type { SmsCompliance, SmsOutcome } from './sms-compliance.js'

export interface TelephonyDeps {
  engine: Engine
  tenants: TenantDirectory
  hashParty: (salt: Buffer, e164: string) => string
  records: RecordWriter
  /** spec 2.2 callCount/lastCallAt in memory: told of each call this node routes (issue 13). */
  callCounter: CallCounter
  provider: SmsProvider
  /** The sandbox provider sends nothing and counts a forward as delivered (DECISIONS 1). */
  sandbox: boolean
  /** Read per callback: PUBLIC_BASE_URL, or the listener's URL once its port is bound. */
  publicBaseUrl: () => string
  log: Logger
  now: () => number
  /** How long an inbound SMS may wait for its forward before the answer is 503 (DECISIONS 5: 2 s). */
  smsBudgetMs?: number
  /** Issue #16: SMS keywords (STOP, START, HELP) and opt-outs; without it every message routes as before. */
  smsCompliance?: SmsCompliance
  /** Counts each voice and SMS routing outcome (metrics). */
  countCallback?: (channel: 'voice' | 'sms', outcome: 'routed' | 'rejected' | 'expired_behaviour' | 'unknown_proxy') => void
}

const OUTCOME = {
  'connect': 'routed', 'direction-not-allowed': 'rejected', 'channel-not-allowed': 'rejected', 'no-session': 'expired_behaviour', 'unknown-proxy': 'unknown_proxy',
} as const

/** A decision naming a session: routed, or refused by its direction mode or (issue #16) its channels. */
type Matched = Extract<RouteDecision, { kind: 'connect' | 'direction-not-allowed' | 'channel-not-allowed' }>

function matched(dec: RouteDecision): dec is Matched {
  return dec.kind === 'connect' || dec.kind === 'direction-not-allowed' || dec.kind === 'channel-not-allowed'
}

const XML = 'application/xml'
const JSON_TYPE = 'application/json; charset=utf-8'
const SMS_PATH = '/v1/webhooks/cpaas/sms'
const RECENT_MAX = 100_000
/** A provider retries a callback within seconds (its own timeout): ids older than this are forgotten (engine/recent.ts). */
const RECENT_MS = 10 * 60_000
const SMS_STATUS_RETRY_MS = [1_000, 5_000]
const SMS_BUDGET_MS = 1_500
const SMS_RETRY_AFTER_S = '5'
const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/** The epoch ms in a UUIDv7 (its first 48 bits). */
function uuidTime(id: string): number {
  return parseInt(id.slice(0, 8) + id.slice(9, 13), 16)
}

export function createTelephony(d: TelephonyDeps): CallbackHandlers {
  const smsBudgetMs = d.smsBudgetMs ?? SMS_BUDGET_MS
  /** Recent provider ids → our ids: a replayed voice fetch gets the same callId and changes nothing. */
  const calls = new Recent<string>(RECENT_MAX, { maxAgeMs: RECENT_MS, now: d.now })
  /** Inbound message ids whose forward is settled (handed over, dropped for good, or found done). */
  const forwarded = new Recent<true>(RECENT_MAX, { maxAgeMs: RECENT_MS, now: d.now })
  /** Forwards under way, so a provider retry waits for the same one instead of starting another. */
  const forwarding = new Map<string, Promise<SmsOutcome>>()

  /**
   * Party B's hash: remembered on the live session after its first call (an HMAC is about ten Map
   * lookups). `live`: the session, when the caller already looked it up (the voice fetch does, once);
   * undefined looks it up.
   */
  function partyBHash(dec: Matched, caller: string, live = d.engine.live(dec.sessionId)): string {
    // party B: the customer. A_TO_B dials them (or, refused, was placed by the agent); B_TO_A is them calling.
    const partyB = dec.direction === 'B_TO_A' ? caller : dec.kind === 'connect' ? dec.to : d.engine.get(dec.sessionId)?.customerPhone
    if (partyB === undefined) return ''
    const known = live?.customerHash(partyB)
    if (known) return known
    const tenant = d.tenants.peek(dec.tenantId)
    if (!tenant) return ''
    const hash = d.hashParty(tenant.salt, partyB)
    live?.rememberCustomerHash(partyB, hash)
    return hash
  }

  /** The call record as the voice fetch writes it, for a decision the engine made on `caller`'s call. */
  function callRow(dec: Matched, caller: string, direction: CallDirection, proxy: string, callId: string, callSid: string, at: number, live?: LiveView): CallInsert {
    return {
      id: callId, sessionId: dec.sessionId, tenantId: dec.tenantId, providerCallId: callSid, status: 'RINGING', direction,
      initiatedAt: at, partyBHash: partyBHash(dec, caller, live), proxy,
      recordingConsentPlayed: dec.kind === 'connect' && dec.recording,
    }
  }

  /** The fetch's record; its call.incoming (and call.failed) are made from it when it is applied. */
  function recordCallStart(dec: Matched, caller: string, proxy: string, callId: string, callSid: string, now: number, live: LiveView | undefined) {
    const row = callRow(dec, caller, dec.direction, proxy, callId, callSid, now, live)
    const settled = () => d.callCounter.settled(callId)
    // DECISIONS 5: a call against the direction mode is rejected and recorded as FAILED; so is
    // one on a session that carries SMS only (issue #16).
    const recorded = dec.kind === 'connect' ? row : { ...row, status: 'FAILED' as const, endedAt: now }
    d.records.upsertCall(recorded, CALL_START).then(settled, settled)
  }

  function voice(req: ApiRequest): ApiReply {
    const f = req.form
    const callSid = f?.['CallSid'], from = f?.['From'], to = f?.['To']
    if (!callSid || !from || !to) return { status: 400, body: EMPTY_RESPONSE, contentType: XML }
    const now = d.now()
    const dec = d.engine.route(to, from, now)
    d.countCallback?.('voice', OUTCOME[dec.kind])
    if (matched(dec)) {
      let callId = calls.get(callSid)
      if (callId === undefined) {
        const id = callId = uuidv7(now)
        calls.set(callSid, id)
        // One lookup of the session for its count and its party-B hash (at 1M sessions each is a cache miss).
        const live = d.engine.live(dec.sessionId)
        d.callCounter.routed(live, id, now)
        setImmediate(() => recordCallStart(dec, from, to, id, callSid, now, live))
      }
      if (dec.kind === 'connect') return { status: 200, body: decisionTexml(dec, { baseUrl: d.publicBaseUrl(), callId }), contentType: XML }
    }
    return { status: 200, body: decisionTexml(dec, { baseUrl: d.publicBaseUrl() }), contentType: XML }
  }

  /**
   * What the voice fetch would have recorded for this call, from a later callback: the session is
   * found as at the fetch, by proxy and party. The parent call's callbacks (dial-status, the
   * application's status) carry the caller in From and the proxy in To; the dialed leg's status
   * carries the proxy in From and the called party in To, so its direction is the reverse.
   */
  function rebuild(callId: string, f: FormFields, leg: 'parent' | 'child', now: number): CallInsert | undefined {
    const from = f['From'], to = f['To']
    const callSid = leg === 'child' ? f['ParentCallSid'] : f['CallSid']
    // A call this process routed had its record queued here: nothing to rebuild.
    if (!from || !to || !callSid || calls.get(callSid) !== undefined) return undefined
    const [proxy, party] = leg === 'parent' ? [to, from] : [from, to]
    const dec = d.engine.route(proxy, party, now)
    if (!matched(dec)) return undefined
    const reversed: CallDirection = dec.direction === 'A_TO_B' ? 'B_TO_A' : 'A_TO_B'
    const direction = leg === 'parent' ? dec.direction : reversed
    const at = UUID_RE.test(callId) ? Math.min(now, uuidTime(callId)) : now
    const row = callRow(dec, party, direction, proxy, callId, callSid, at)
    return { ...row, recordingConsentPlayed: false }
  }

  function callStatus(req: ApiRequest, source: 'status' | 'dial-status'): ApiReply {
    const done: ApiReply = source === 'status' ? { status: 200 } : { status: 200, body: hangupTexml(), contentType: XML }
    const f = req.form
    const queryId = new URLSearchParams(req.rawQuery).get('callId')
    const value = source === 'status' ? f?.['CallStatus'] : f?.['DialCallStatus']
    if (!f || !value) return { status: 400, body: EMPTY_RESPONSE, contentType: XML }
    const now = d.now()
    const duration = parseDurationSeconds(source === 'status' ? f['CallDuration'] : f['DialCallDuration'])
    const common = { value, at: now, ...(duration !== undefined ? { duration } : {}) }
    let cb: CallCallback
    if (queryId) {
      if (!UUID_RE.test(queryId)) return done // not a call of ours: nothing to change
      const rebuilt = rebuild(queryId, f, source === 'status' ? 'child' : 'parent', now)
      cb = {
        key: { callId: queryId }, source, ...common,
        ...(source === 'dial-status' && f['RecordingUrl'] ? { recordingUrl: f['RecordingUrl'] } : {}),
        ...(rebuilt ? { rebuild: rebuilt } : {}),
      }
    } else if (source === 'status' && f['CallSid']) {
      // No callId: the TeXML application's own status callback, reporting the parent (inbound)
      // call by its CallSid (issue #5).
      const rebuilt = rebuild(uuidv7(now), f, 'parent', now)
      cb = { key: { providerCallId: f['CallSid'] }, source: 'parent-status', ...common, ...(rebuilt ? { rebuild: rebuilt } : {}) }
    } else {
      return { status: 400, body: EMPTY_RESPONSE, contentType: XML }
    }
    void d.records.callEvent(cb)
    return done
  }

  function recording(req: ApiRequest): ApiReply {
    const f = req.form
    const callId = new URLSearchParams(req.rawQuery).get('callId')
    if (!f || !callId || !f['RecordingSid']) return { status: 400, body: EMPTY_RESPONSE, contentType: XML }
    if (!UUID_RE.test(callId)) return { status: 200 }
    const seconds = parseDurationSeconds(f['RecordingDuration'])
    void d.records.callEvent({
      key: { callId }, source: 'recording', value: f['RecordingStatus'] ?? 'completed', at: d.now(), recordingSid: f['RecordingSid'],
      ...(seconds !== undefined ? { duration: seconds } : {}), ...(f['RecordingUrl'] ? { recordingUrl: f['RecordingUrl'] } : {}),
    })
    return { status: 200 }
  }

  /**
   * One inbound message, forwarded at most once per outcome: the QUEUED record is the claim (the
   * provider's message id is its key); a claim found already forwarded is done; the forward's
   * outcome is on disk (journal) before the answer says it was handed over.
   */
  async function forwardOnce(dec: Extract<RouteDecision, { kind: 'connect' }>, proxy: string, messageId: string, text: string, now: number): Promise<SmsOutcome> {
    const id = uuidv7(now)
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
      const sent = await d.provider.sendSms({ from: proxy, to: dec.to, text, webhookUrl: d.publicBaseUrl() + SMS_PATH })
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
   * reason `channel` (it matched a session, unlike the unmatched messages DECISIONS 5 drops without
   * a record; the record also keeps a provider retry from reporting it twice) and reported by
   * sms.blocked. No usage: nothing was sent.
   */
  async function blockChannel(dec: Extract<RouteDecision, { kind: 'channel-not-allowed' }>, proxy: string, messageId: string, now: number): Promise<SmsOutcome> {
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

  /**
   * A delivery status for a forwarded message. The provider may report it before our send has
   * stored the forwarded message's id (the send's answer and the status webhook race): a status
   * that matched nothing is tried again after 1 s and 5 s. A status never moves backwards, so a
   * retry of one that was merely stale changes nothing.
   */
  function smsStatus(forwardId: string, status: SmsStatus, deliveredAt: number | null, attempt: number): void {
    void d.records.updateSmsStatusByForwardId(forwardId, status, deliveredAt).then(hit => {
      const wait = SMS_STATUS_RETRY_MS[attempt]
      if (!hit && wait !== undefined) setTimeout(() => smsStatus(forwardId, status, deliveredAt, attempt + 1), wait).unref()
    })
  }

  const ok: ApiReply = { status: 200, body: '{"ok":true}', contentType: JSON_TYPE }
  const retryLater: ApiReply = { status: 503, body: '{"ok":false}', contentType: JSON_TYPE, headers: { 'retry-after': SMS_RETRY_AFTER_S } }

  async function sms(req: ApiRequest): Promise<ApiReply> {
    const cb = parseSmsCallback(req.headers['content-type'], req.rawBody ?? '')
    if (cb.kind === 'invalid') return { status: 400, body: '{"ok":false}', contentType: JSON_TYPE }
    if (cb.kind === 'status') {
      smsStatus(cb.messageId, cb.status, cb.status === 'DELIVERED' ? d.now() : null, 0)
      return ok
    }
    if (cb.kind === 'ignored' || forwarded.get(cb.messageId)) return ok
    const now = d.now()
    const dec = d.engine.route(cb.to, cb.from, now, 'sms')
    d.countCallback?.('sms', OUTCOME[dec.kind])
    // Issue #16: the inactivity clock counts every SMS that is recorded (not one the direction drops).
    if (dec.kind === 'connect' || dec.kind === 'channel-not-allowed') d.engine.live(dec.sessionId)?.noteActivity(now)
    // Issue #16: keywords and opt-outs, decided from memory. Without them: not matched or
    // direction not allowed is dropped, no record (DECISIONS 5).
    const action = d.smsCompliance ? d.smsCompliance.action(dec, { proxy: cb.to, from: cb.from, text: cb.text }) : dec.kind === 'connect' ? { kind: 'forward' as const, decision: dec } : { kind: 'drop' as const }
    // Issue #16: a message the session does not carry (voice only) is blocked, and recorded.
    const offChannel = dec.kind === 'channel-not-allowed' ? dec : null
    if (action.kind === 'drop' && offChannel === null) return ok
    let run = forwarding.get(cb.messageId)
    if (!run) {
      const messageId = cb.messageId
      const work = action.kind === 'forward'
        ? forwardOnce(action.decision, cb.to, messageId, cb.text, now)
        : action.kind === 'drop' ? blockChannel(offChannel!, cb.to, messageId, now)
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
    return await orAfter(run, smsBudgetMs, 'late') === 'done' ? ok : retryLater
  }

  return {
    voice,
    voiceStatus: req => callStatus(req, 'status'),
    dialStatus: req => callStatus(req, 'dial-status'),
    recording,
    sms,
  }
}
