// A Service's intercept_callback_url (docs/twilio-proxy.md, Callbacks): before a call or SMS of a
// façade session is proxied, its Interaction (no outbound leg yet) is POSTed there, signed like
// every callback. An HTTP 403 answer blocks it; any other answer, a failure or no answer within
// the bound (TWILIO_PROXY_INTERCEPT_TIMEOUT_MS, 2 s) lets it through. Which native sessions have
// such a URL is kept in memory (loaded at boot, after each façade change on this node that can
// change it, and every few seconds for the other nodes' changes): a session without one costs a
// Set lookup, no I/O.
import type { Logger } from 'pino'
import type { RouteDecision } from '../../engine/index.js'
import { facadeOfNative, interceptedNativeSessions } from '../../sql/twilio-proxy-callbacks.js'
import type { InteractionRecord } from '../../sql/twilio-proxy-interactions.js'
import type { Db } from '../../sql/transaction.js'
import { interactionParams, interceptParams, signedForm } from './callback-params.js'
import { tokenCipher } from './credentials.js'

type Connect = Extract<RouteDecision, { kind: 'connect' }>

/** One form POST (the webhook transport, with its SSRF guard); statusCode 0 when no answer came. */
export type FormPost = (req: { url: string; headers: Record<string, string>; body: string; contentType: string; timeoutMs: number; readBody?: number }) =>
  Promise<{ statusCode: number; body?: string; contentType?: string }>

export interface Intercept {
  /** Whether the (native) session's Service has an intercept URL: a memory lookup. */
  has(sessionId: string): boolean
  /** undefined: the session has no intercept URL (go on at once). Else: true to go on, false blocked. */
  check(dec: Connect, kind: 'call' | 'sms', recordId: string, providerId: string, now: number): Promise<boolean> | undefined
  /** Reads again which native sessions have an intercept URL. */
  reload(): Promise<void>
  /** Whether the Service had an intercept URL at the last reload (its sessions' changes need one then). */
  covers(serviceId: string): boolean
  close(): void
}

export const INTERCEPT_TIMEOUT_MS = 2_000
const RELOAD_MS = 5_000

export function createIntercept(o: { db: Db; phoneKey: Buffer; post: FormPost; log: Pick<Logger, 'warn' | 'error'>; timeoutMs?: number; reloadMs?: number }): Intercept {
  const cipher = tokenCipher(o.phoneKey)
  const timeoutMs = o.timeoutMs ?? INTERCEPT_TIMEOUT_MS
  let intercepted = new Set<string>()
  let services = new Set<string>()
  /** Reads may overlap (a change while the timer's read runs): the newest read started wins. */
  let started = 0, applied = 0

  async function reload(): Promise<void> {
    const mine = ++started
    try {
      const read = await interceptedNativeSessions(o.db)
      if (mine > applied) { applied = mine; intercepted = new Set(read.natives); services = new Set(read.services) }
    } catch (err) {
      o.log.error({ code: 'twilio-intercept', error: err }, 'intercepted sessions not reloaded')
    }
  }
  const timer = setInterval(() => void reload(), o.reloadMs ?? RELOAD_MS)
  timer.unref()

  async function ask(dec: Connect, kind: 'call' | 'sms', recordId: string, providerId: string, now: number): Promise<boolean> {
    try {
      const f = await facadeOfNative(o.db, dec.sessionId)
      if (!f?.interceptUrl) return true
      // The caller's participant: the agent (first) places A_TO_B, the customer B_TO_A.
      const [inbound, outbound] = dec.direction === 'A_TO_B' ? [f.agentParticipantId, f.customerParticipantId] : [f.customerParticipantId, f.agentParticipantId]
      const row: InteractionRecord = {
        id: recordId, session_id: f.sessionId, kind, inbound_participant_id: inbound, outbound_participant_id: outbound,
        outbound_status: null, resource_sid: null, record_status: kind === 'call' ? 'RINGING' : 'QUEUED', duration: null,
        provider_id: providerId, forward_id: null, created_at: now, updated_at: now,
      }
      const params = interceptParams(interactionParams(f.accountSid, f.serviceId, row))
      const req = signedForm(cipher.decrypt(f.tokenEnc), f.interceptUrl, params)
      const res = await o.post({ url: f.interceptUrl, ...req, timeoutMs })
      return res.statusCode !== 403
    } catch (err) {
      o.log.warn({ code: 'twilio-intercept', error: err }, 'intercept callback failed; the interaction goes on')
      return true
    }
  }

  return {
    has: id => intercepted.has(id),
    check: (dec, kind, recordId, providerId, now) => intercepted.has(dec.sessionId) ? ask(dec, kind, recordId, providerId, now) : undefined,
    reload,
    covers: serviceId => services.has(serviceId),
    close: () => clearInterval(timer),
  }
}
