// What the Twilio Proxy façade's callbacks need from the store (docs/twilio-proxy.md, Callbacks):
// the Service and account behind a native session, and whether a native session's events are
// wanted by a Service's callback_url (so the outbox keeps them for the dispatcher).
import { sql } from 'slonik'
import { guard } from './errors.js'
import type { Db } from './transaction.js'

/** The native events that are interactions (or their status changes): not sms.blocked (an opt-out or off-channel text, never forwarded). */
export const CALLBACK_EVENTS: ReadonlySet<string> = new Set(['call.incoming', 'call.answered', 'call.ended', 'call.failed', 'sms.received', 'sms.sent'])

/**
 * For outboxInsertFrom's "is this event wanted" check: true when the event `e` (a call.* or sms.*
 * of a native session behind a façade session) goes to its Service's callback_url. One primary
 * key lookup of twilio_native_sessions, nothing for a session that is not a façade's.
 */
export const facadeCallbackWanted = sql.fragment`
  SELECT true FROM twilio_native_sessions n
  JOIN twilio_sessions s ON s.id = n.session_id JOIN twilio_services v ON v.id = s.service_id
  WHERE n.native_id = e.session_id AND v.callback_url IS NOT NULL AND e.type = ANY(${sql.array([...CALLBACK_EVENTS], 'text')})`

export interface FacadeOfNative {
  sessionId: string; serviceId: string; tenantId: string
  callbackUrl: string | null; interceptUrl: string | null
  accountSid: string; tokenEnc: Buffer
  agentParticipantId: string; customerParticipantId: string
}

/** The façade session, Service and account behind a native session; null when it has none. */
export async function facadeOfNative(db: Db, nativeId: string): Promise<FacadeOfNative | null> {
  return facadeWhere(db, sql.fragment`s.id = (SELECT session_id FROM twilio_native_sessions WHERE native_id = ${nativeId})`, sql.fragment`n.native_id = ${nativeId}`)
}

/** The same for a façade session (its agent and customer participants: those of its latest native session, if any). */
export async function facadeOfSession(db: Db, sessionId: string): Promise<FacadeOfNative | null> {
  return facadeWhere(db, sql.fragment`s.id = ${sessionId}`, sql.fragment`n.session_id = ${sessionId}`)
}

async function facadeWhere(db: Db, session: ReturnType<typeof sql.fragment>, native: ReturnType<typeof sql.fragment>): Promise<FacadeOfNative | null> {
  return guard(async () => {
    const r = await db.maybeOne(sql.unsafe`
      SELECT s.id AS session_id, v.id AS service_id, v.tenant_id, v.callback_url, v.intercept_callback_url, a.sid, a.token_enc,
        n.agent_participant_id, n.customer_participant_id
      FROM twilio_sessions s JOIN twilio_services v ON v.id = s.service_id JOIN twilio_accounts a ON a.tenant_id = v.tenant_id
      LEFT JOIN LATERAL (SELECT * FROM twilio_native_sessions n WHERE ${native} ORDER BY n.native_id DESC LIMIT 1) n ON true
      WHERE ${session}`)
    return r ? {
      sessionId: r.session_id, serviceId: r.service_id, tenantId: r.tenant_id, callbackUrl: r.callback_url, interceptUrl: r.intercept_callback_url,
      accountSid: r.sid, tokenEnc: r.token_enc, agentParticipantId: r.agent_participant_id, customerParticipantId: r.customer_participant_id,
    } : null
  })
}

/** The outbox type of a façade interaction's callback (not a maskline event: never on the stream). */
export const INTERACTION_CALLBACK = 'twilio.interaction'

/** A MessageInteraction's callback_url delivery, queued in the outbox (the dispatcher's retries). */
export async function queueInteractionCallback(db: Db, q: { id: string; tenantId: string; sessionId: string; interactionId: string; now: number }): Promise<void> {
  const envelope = { id: q.id, type: INTERACTION_CALLBACK, createdAt: new Date(q.now).toISOString(), data: { tenantId: q.tenantId, sessionId: q.sessionId, interactionId: q.interactionId } }
  await guard(() => db.query(sql.unsafe`
    INSERT INTO outbox (id, tenant_id, session_id, type, envelope, created_at, next_attempt_at)
    VALUES (${q.id}, ${q.tenantId}, ${q.sessionId}, ${INTERACTION_CALLBACK}, ${JSON.stringify(envelope)}::jsonb, now(), now())`))
}

/** The native sessions whose Service has an intercept_callback_url (the router's memory). */
/** The Services with an intercept_callback_url, and the native sessions of their open sessions. */
export async function interceptedNativeSessions(db: Db): Promise<{ services: string[]; natives: string[] }> {
  return guard(async () => {
    const rows = await db.any(sql.unsafe`
      SELECT v.id AS service_id, n.native_id FROM twilio_services v
      LEFT JOIN twilio_sessions s ON s.service_id = v.id AND s.status IN ('open','in-progress')
      LEFT JOIN twilio_native_sessions n ON n.session_id = s.id
      WHERE v.intercept_callback_url IS NOT NULL`) as ReadonlyArray<{ service_id: string; native_id: string | null }>
    return { services: [...new Set(rows.map(r => r.service_id))], natives: rows.flatMap(r => (r.native_id === null ? [] : [r.native_id])) }
  })
}

/** The pool numbers of Services with an out_of_session_callback_url (the router's memory). */
export async function outOfSessionNumbers(db: Db): Promise<Array<{ number: string; service_id: string; tenant_id: string; url: string }>> {
  return guard(async () => [...await db.any(sql.unsafe`
    SELECT p.number, v.id AS service_id, v.tenant_id, v.out_of_session_callback_url AS url
    FROM twilio_phone_numbers p JOIN twilio_services v ON v.id = p.service_id WHERE v.out_of_session_callback_url IS NOT NULL`)] as Array<{ number: string; service_id: string; tenant_id: string; url: string }>)
}
