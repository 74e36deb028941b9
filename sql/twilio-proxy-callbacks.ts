// What the Twilio Proxy façade's callbacks need from the store (docs/twilio-proxy.md, Callbacks):
// the Service and account behind a native session, and whether a native session's events are
// wanted by a Service's callback_url (so the outbox keeps them for the dispatcher).
import { sql } from 'slonik'
import { guard } from './errors.js'
import type { Db } from './transaction.js'

/**
 * For outboxInsertFrom's "is this event wanted" check: true when the event `e` (a call.* or sms.*
 * of a native session behind a façade session) goes to its Service's callback_url. One primary
 * key lookup of twilio_native_sessions, nothing for a session that is not a façade's.
 */
export const facadeCallbackWanted = sql.fragment`
  SELECT true FROM twilio_native_sessions n
  JOIN twilio_sessions s ON s.id = n.session_id JOIN twilio_services v ON v.id = s.service_id
  WHERE n.native_id = e.session_id AND v.callback_url IS NOT NULL AND (e.type LIKE 'call.%' OR e.type LIKE 'sms.%')`

export interface FacadeOfNative {
  sessionId: string; serviceId: string; tenantId: string
  callbackUrl: string | null; interceptUrl: string | null
  accountSid: string; tokenEnc: Buffer
  agentParticipantId: string; customerParticipantId: string
}

/** The façade session, Service and account behind a native session; null when it has none. */
export async function facadeOfNative(db: Db, nativeId: string): Promise<FacadeOfNative | null> {
  return guard(async () => {
    const r = await db.maybeOne(sql.unsafe`
      SELECT s.id AS session_id, v.id AS service_id, v.tenant_id, v.callback_url, v.intercept_callback_url, a.sid, a.token_enc,
        n.agent_participant_id, n.customer_participant_id
      FROM twilio_native_sessions n JOIN twilio_sessions s ON s.id = n.session_id JOIN twilio_services v ON v.id = s.service_id
      JOIN twilio_accounts a ON a.tenant_id = v.tenant_id
      WHERE n.native_id = ${nativeId}`)
    return r ? {
      sessionId: r.session_id, serviceId: r.service_id, tenantId: r.tenant_id, callbackUrl: r.callback_url, interceptUrl: r.intercept_callback_url,
      accountSid: r.sid, tokenEnc: r.token_enc, agentParticipantId: r.agent_participant_id, customerParticipantId: r.customer_participant_id,
    } : null
  })
}

/** The native sessions whose Service has an intercept_callback_url (the router's memory). */
export async function interceptedNativeSessions(db: Db): Promise<string[]> {
  return guard(async () => [...await db.anyFirst(sql.unsafe`
    SELECT n.native_id FROM twilio_native_sessions n JOIN twilio_sessions s ON s.id = n.session_id JOIN twilio_services v ON v.id = s.service_id
    WHERE v.intercept_callback_url IS NOT NULL AND s.status IN ('open','in-progress')`)] as string[])
}

/** The pool numbers of Services with an out_of_session_callback_url (the router's memory). */
export async function outOfSessionNumbers(db: Db): Promise<Array<{ number: string; service_id: string; tenant_id: string; url: string }>> {
  return guard(async () => [...await db.any(sql.unsafe`
    SELECT p.number, v.id AS service_id, v.tenant_id, v.out_of_session_callback_url AS url
    FROM twilio_phone_numbers p JOIN twilio_services v ON v.id = p.service_id WHERE v.out_of_session_callback_url IS NOT NULL`)] as Array<{ number: string; service_id: string; tenant_id: string; url: string }>)
}
