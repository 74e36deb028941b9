// Provider callbacks (spec 4.10, DECISIONS 5). The voice answer is computed from the engine's
// memory with no I/O on the path; call records are written behind it (setImmediate, then group
// commit), each with its events and usage in the same transaction (sql/record-writer.ts). SMS are
// acknowledged at once and forwarded afterwards.
// No phone number or SMS text is ever logged or put into an event.
import type { DatabasePool } from 'slonik'
import type { Logger } from 'pino'
import type { Engine, RouteDecision } from '../engine/index.js'
import type { CallStatus, SmsStatus } from '../engine/types.js'
import type { ApiReply, ApiRequest } from '../api/route.js'
import { buildEnvelope, type EventEnvelope, type EventType } from '../api/event-envelope.js'
import { uuidv7 } from '../api/ids.js'
import { parseForm } from '../api/cpaas/form.js'
import { decisionTexml, EMPTY_RESPONSE, hangupTexml } from '../api/cpaas/texml.js'
import { applyCallStatus, billableMinutes, parseDurationSeconds } from '../api/cpaas/call-status.js'
import { parseSmsCallback } from '../api/cpaas/sms-payload.js'
import type { SignatureVerifier } from './cpaas/signature.js'
import type { SmsProvider } from './cpaas/provider.js'
import { getCallRecord, type Effects, type RecordWriter } from '../sql/records.js'
import { proxyOfSession } from '../sql/telephony.js'
import type { UsageInput } from '../sql/billing.js'
import type { TenantDirectory } from './tenant-directory.js'

export interface TelephonyDeps {
  db: DatabasePool
  engine: Engine
  tenants: TenantDirectory
  hashParty: (salt: Buffer, e164: string) => string
  records: RecordWriter
  provider: SmsProvider
  /** The sandbox provider sends nothing and counts a forward as delivered (DECISIONS 1). */
  sandbox: boolean
  verifier: SignatureVerifier
  publicBaseUrl: string
  log: Logger
  now: () => number
}

const XML = 'application/xml'
const SMS_PATH = '/v1/webhooks/cpaas/sms'
const RECENT_MAX = 100_000
const SMS_STATUS_RETRY_MS = [1_000, 5_000]

/**
 * A bounded memory of recent keys: two generations of RECENT_MAX / 2, the older dropped whole when
 * the newer fills. Evicting the oldest key of one Map instead (`keys().next()` after each delete)
 * walks the deleted slots V8 keeps at the front of the table until its next rehash: at 100,000
 * entries that was 14 % of the service's CPU in the voice bench.
 */
export class Recent<V> {
  #young = new Map<string, V>()
  #old = new Map<string, V>()
  get(k: string): V | undefined { return this.#young.get(k) ?? this.#old.get(k) }
  set(k: string, v: V): void {
    if (this.#young.size >= RECENT_MAX / 2) {
      this.#old = this.#young
      this.#young = new Map()
    }
    this.#young.set(k, v)
  }
}

export function createTelephony(d: TelephonyDeps) {
  /** Recent provider ids → our ids: a replayed voice fetch gets the same callId and changes nothing. */
  const calls = new Recent<string>()
  const messages = new Recent<string>()
  /** callId → what events need, while the call is young (saves a read per status callback). */
  const callMeta = new Recent<{ proxy: string }>()

  function verify(req: ApiRequest): string | null {
    const v = d.verifier.verify({ headers: req.headers, rawBody: req.rawBody ?? Buffer.alloc(0), path: req.path, query: req.rawQuery })
    return v.ok ? null : v.reason
  }

  function event(type: EventType, at: number, data: Parameters<typeof buildEnvelope>[3]): EventEnvelope {
    return buildEnvelope(uuidv7(at), type, at, data)
  }

  function recordCallStart(dec: Extract<RouteDecision, { kind: 'connect' | 'direction-not-allowed' }>, caller: string, proxy: string, callId: string, callSid: string, now: number) {
    const tenant = d.tenants.peek(dec.tenantId)
    const s = d.engine.get(dec.sessionId)
    const partyB = dec.direction === 'A_TO_B' ? (dec.kind === 'connect' ? dec.to : s?.customerPhone) : caller
    const partyBHash = tenant && partyB ? d.hashParty(tenant.salt, partyB) : ''
    const status: CallStatus = dec.kind === 'connect' ? 'RINGING' : 'FAILED'
    const recording = dec.kind === 'connect' && dec.recording
    const base = { sessionId: dec.sessionId, tenantId: dec.tenantId, proxyNumber: proxy, callId, direction: dec.direction, durationSeconds: 0 }
    // Written with the record only when it is new: a replay (or a failed write, reported by the
    // writer) emits nothing.
    void d.records.upsertCall({
      id: callId, sessionId: dec.sessionId, tenantId: dec.tenantId, providerCallId: callSid, status,
      direction: dec.direction, initiatedAt: now, partyBHash, recordingConsentPlayed: recording,
      ...(status === 'FAILED' ? { endedAt: now } : {}),
    }, status === 'RINGING'
      ? [event('call.incoming', now, { ...base, status })]
      : [event('call.incoming', now, { ...base, status: 'RINGING' }), event('call.failed', now, { ...base, status })])
  }

  async function voice(req: ApiRequest): Promise<ApiReply> {
    const bad = verify(req)
    if (bad) {
      d.log.warn({ reason: bad, callback: 'voice' }, 'callback signature refused')
      return { status: 403, body: EMPTY_RESPONSE, contentType: XML }
    }
    const f = parseForm(req.rawBody ?? '')
    const callSid = f?.['CallSid'], from = f?.['From'], to = f?.['To']
    if (!callSid || !from || !to) return { status: 400, body: EMPTY_RESPONSE, contentType: XML }
    const now = d.now()
    const dec = d.engine.route(to, from, now)
    if (dec.kind === 'connect') {
      let callId = calls.get(callSid)
      const replay = callId !== undefined
      if (!callId) { callId = uuidv7(now); calls.set(callSid, callId) }
      const xml = decisionTexml(dec, { baseUrl: d.publicBaseUrl, callId })
      if (!replay) {
        const id = callId
        callMeta.set(id, { proxy: to })
        setImmediate(() => recordCallStart(dec, from, to, id, callSid, now))
      }
      return { status: 200, body: xml, contentType: XML }
    }
    if (dec.kind === 'direction-not-allowed' && calls.get(callSid) === undefined) {
      // DECISIONS 5: a call against the direction mode is rejected and recorded as FAILED.
      const id = uuidv7(now)
      calls.set(callSid, id)
      setImmediate(() => recordCallStart(dec, from, to, id, callSid, now))
    }
    return { status: 200, body: decisionTexml(dec, { baseUrl: d.publicBaseUrl }), contentType: XML }
  }

  async function callStatus(req: ApiRequest, source: 'status' | 'dial-status'): Promise<ApiReply> {
    const done: ApiReply = source === 'status' ? { status: 200 } : { status: 200, body: hangupTexml(), contentType: XML }
    const bad = verify(req)
    if (bad) {
      d.log.warn({ reason: bad, callback: `voice/${source}` }, 'callback signature refused')
      return { status: 403, body: EMPTY_RESPONSE, contentType: XML }
    }
    const f = parseForm(req.rawBody ?? '')
    const queryId = new URLSearchParams(req.rawQuery).get('callId')
    // No callId on /voice/status: the TeXML application's own status callback, reporting the
    // parent (inbound) call by the CallSid stored at the voice fetch (issue #5).
    const leg = source === 'status' && !queryId ? 'parent-status' : source
    const key = queryId ? { callId: queryId } : leg === 'parent-status' && f?.['CallSid'] ? { providerCallId: f['CallSid'] } : null
    const value = source === 'status' ? f?.['CallStatus'] : f?.['DialCallStatus']
    if (!f || !key || !value) return { status: 400, body: EMPTY_RESPONSE, contentType: XML }
    await d.records.flush() // the start of this call may still be queued
    const rec = await getCallRecord(d.db, key)
    if (!rec) return done // unknown call: nothing to change, and the provider must not retry forever
    const callId = rec.id
    const duration = parseDurationSeconds(source === 'status' ? f['CallDuration'] : f['DialCallDuration'])
    const change = applyCallStatus(rec.status, {
      source: leg, callStatus: value, ...(duration !== undefined ? { duration } : {}), answeredSeen: rec.answeredAt !== null,
    })
    if (source === 'dial-status' && f['RecordingUrl'] && !rec.recordingUrl) {
      await d.records.updateCall({ callId }, { recordingUrl: f['RecordingUrl'] })
    }
    if (!change) return done
    const now = d.now()
    const terminal = change.status === 'COMPLETED' || change.status === 'MISSED' || change.status === 'FAILED'
    const effects: Effects = {}
    if (change.event) {
      const proxy = callMeta.get(callId)?.proxy ?? await proxyOfSession(d.db, rec.sessionId) ?? ''
      effects.events = [event(change.event, now, {
        sessionId: rec.sessionId, tenantId: rec.tenantId, proxyNumber: proxy, callId, direction: rec.direction,
        status: change.status, durationSeconds: change.durationSeconds ?? 0,
      })]
      if (change.status === 'COMPLETED' && (change.durationSeconds ?? 0) > 0) {
        effects.usage = [{ tenantId: rec.tenantId, metric: 'call_minute', quantity: billableMinutes(change.durationSeconds ?? 0), at: now, sessionId: rec.sessionId, callRecordId: callId, dedupeKey: `call_minute:${callId}` }]
      }
    }
    // The guard on the status it was read in: when another callback moved it first, this one
    // changes nothing and emits nothing.
    await d.records.updateCall({ callId }, {
      status: change.status,
      ...(change.status === 'ANSWERED' ? { answeredAt: now } : {}),
      ...(terminal ? { endedAt: now, durationSeconds: change.durationSeconds ?? 0 } : {}),
    }, [rec.status], effects)
    return done
  }

  async function recording(req: ApiRequest): Promise<ApiReply> {
    const bad = verify(req)
    if (bad) {
      d.log.warn({ reason: bad, callback: 'voice/recording' }, 'callback signature refused')
      return { status: 403, body: EMPTY_RESPONSE, contentType: XML }
    }
    const f = parseForm(req.rawBody ?? '')
    const callId = new URLSearchParams(req.rawQuery).get('callId')
    if (!f || !callId || !f['RecordingSid']) return { status: 400, body: EMPTY_RESPONSE, contentType: XML }
    await d.records.flush()
    const rec = await getCallRecord(d.db, { callId })
    if (!rec) return { status: 200 }
    const seconds = parseDurationSeconds(f['RecordingDuration']) ?? 0
    const usage: UsageInput[] = (f['RecordingStatus'] ?? 'completed') === 'completed' && seconds > 0
      ? [{ tenantId: rec.tenantId, metric: 'recording_minute', quantity: billableMinutes(seconds), at: d.now(), sessionId: rec.sessionId, callRecordId: callId, dedupeKey: `recording_minute:${f['RecordingSid']}` }]
      : []
    await d.records.updateCall({ callId }, {
      recordingDurationSeconds: seconds, ...(f['RecordingUrl'] ? { recordingUrl: f['RecordingUrl'] } : {}),
    }, undefined, { usage })
    return { status: 200 }
  }

  async function forwardSms(dec: Extract<RouteDecision, { kind: 'connect' }>, proxy: string, messageId: string, text: string, now: number) {
    const id = uuidv7(now)
    const base = { sessionId: dec.sessionId, tenantId: dec.tenantId, proxyNumber: proxy, smsId: id, direction: dec.direction }
    const stored = await d.records.upsertSms({
      id, sessionId: dec.sessionId, tenantId: dec.tenantId, providerMessageId: messageId,
      direction: dec.direction, status: 'QUEUED', sentAt: now,
    }, {
      events: [event('sms.received', now, { ...base, status: 'QUEUED' })],
      usage: [{ tenantId: dec.tenantId, metric: 'sms_received', quantity: 1, at: now, sessionId: dec.sessionId, dedupeKey: `sms_received:${id}` }],
    })
    if (stored !== id) return // replayed message id (or write failure): never forward twice
    try {
      const sent = await d.provider.sendSms({ from: proxy, to: dec.to, text, webhookUrl: d.publicBaseUrl + SMS_PATH })
      const at = d.now()
      const status = d.sandbox ? 'DELIVERED' : 'SENT'
      await d.records.markSmsForwarded(id, sent.providerMessageId, status, at, {
        events: [event('sms.sent', at, { ...base, status })],
        usage: [{ tenantId: dec.tenantId, metric: 'sms_sent', quantity: 1, at, sessionId: dec.sessionId, dedupeKey: `sms_sent:${id}` }],
      })
    } catch (err) {
      const code = (err as { code?: string }).code ?? 'provider-error'
      d.log.warn({ code, smsId: id }, 'sms forward failed')
      await d.records.markSmsForwarded(id, null, 'FAILED', d.now())
    }
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

  async function sms(req: ApiRequest): Promise<ApiReply> {
    const ok: ApiReply = { status: 200, body: '{"ok":true}', contentType: 'application/json; charset=utf-8' }
    const bad = verify(req)
    if (bad) {
      d.log.warn({ reason: bad, callback: 'sms' }, 'callback signature refused')
      return { status: 403, body: '{"ok":false}', contentType: 'application/json; charset=utf-8' }
    }
    const cb = parseSmsCallback(req.headers['content-type'], req.rawBody ?? '')
    if (cb.kind === 'invalid') return { status: 400, body: '{"ok":false}', contentType: 'application/json; charset=utf-8' }
    if (cb.kind === 'status') {
      smsStatus(cb.messageId, cb.status, cb.status === 'DELIVERED' ? d.now() : null, 0)
      return ok
    }
    if (cb.kind === 'ignored') return ok
    const now = d.now()
    const dec = d.engine.route(cb.to, cb.from, now)
    // Not matched or direction not allowed: dropped, no record (DECISIONS 5).
    if (dec.kind !== 'connect' || messages.get(cb.messageId) !== undefined) return ok
    messages.set(cb.messageId, dec.sessionId)
    const text = cb.text
    setImmediate(() => { void forwardSms(dec, cb.to, cb.messageId, text, now) })
    return ok
  }

  return {
    voice,
    voiceStatus: (req: ApiRequest) => callStatus(req, 'status'),
    dialStatus: (req: ApiRequest) => callStatus(req, 'dial-status'),
    recording,
    sms,
  }
}

export type Telephony = ReturnType<typeof createTelephony>
