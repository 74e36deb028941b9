// The Twilio Proxy façade's interactions (migration 018): the messages it sent itself
// (twilio_interactions) and the call and SMS records of the native sessions behind a façade
// session (twilio_native_sessions), as one list in creation order. Never a message body: maskline
// stores none. Deleting a call or SMS interaction hides it from the façade; the record stays.
import { sql } from 'slonik'
import { guard } from './errors.js'
import { keysetPage, type Page, type PageRequest } from './twilio-proxy-page.js'
import { ts, type Db } from './transaction.js'

export interface InteractionRecord {
  id: string; session_id: string; kind: 'message-interaction' | 'call' | 'sms'
  inbound_participant_id: string | null; outbound_participant_id: string | null
  /** message-interaction: its outbound status and resource SID. */
  outbound_status: string | null; resource_sid: string | null
  /** call: CallStatus (RINGING…FAILED), sms: SMS status (QUEUED…FAILED). */
  record_status: string | null
  duration: number | null
  /** The provider's call or inbound message id; sms: the forwarded message's id. */
  provider_id: string | null; forward_id: string | null
  created_at: number; updated_at: number
}

function union(sessionId: string) {
  return sql.fragment`FROM (
    SELECT i.id, i.session_id, 'message-interaction' AS kind, NULL::uuid AS inbound_participant_id, i.participant_id AS outbound_participant_id,
      i.outbound_status, i.provider_message_id AS resource_sid, NULL::text AS record_status, NULL::int AS duration,
      NULL::text AS provider_id, NULL::text AS forward_id, i.created_at, i.updated_at
    FROM twilio_interactions i WHERE i.session_id = ${sessionId}
    UNION ALL
    SELECT c.id, n.session_id, 'call', CASE WHEN c.direction = 'A_TO_B' THEN n.agent_participant_id ELSE n.customer_participant_id END,
      CASE WHEN c.direction = 'A_TO_B' THEN n.customer_participant_id ELSE n.agent_participant_id END,
      NULL, NULL, c.status, c.duration_seconds, c.provider_call_id, NULL, c.initiated_at, coalesce(c.ended_at, c.answered_at, c.initiated_at)
    FROM call_records c JOIN twilio_native_sessions n ON c.session_id = n.native_id WHERE n.session_id = ${sessionId}
    UNION ALL
    SELECT m.id, n.session_id, 'sms', CASE WHEN m.direction = 'A_TO_B' THEN n.agent_participant_id ELSE n.customer_participant_id END,
      CASE WHEN m.direction = 'A_TO_B' THEN n.customer_participant_id ELSE n.agent_participant_id END,
      NULL, NULL, m.status, NULL, m.provider_message_id, m.forward_message_id, m.sent_at, coalesce(m.delivered_at, m.sent_at)
    FROM sms_records m JOIN twilio_native_sessions n ON m.session_id = n.native_id WHERE n.session_id = ${sessionId}
  ) x WHERE NOT EXISTS (SELECT 1 FROM twilio_hidden_interactions h WHERE h.id = x.id)`
}

const COLUMNS = sql.fragment`id, session_id, kind, inbound_participant_id, outbound_participant_id, outbound_status, resource_sid,
  record_status, duration, provider_id, forward_id, created_at, updated_at`

export async function insertMessageInteraction(db: Db, i: { id: string; sessionId: string; participantId: string; status: string; resourceSid: string | null; now: number }): Promise<void> {
  await guard(() => db.query(sql.unsafe`
    INSERT INTO twilio_interactions (id, session_id, participant_id, type, outbound_status, provider_message_id, created_at, updated_at)
    VALUES (${i.id}, ${i.sessionId}, ${i.participantId}, 'message', ${i.status}, ${i.resourceSid}, ${ts(i.now)}, ${ts(i.now)})`))
}

export async function getInteraction(db: Db, sessionId: string, id: string): Promise<InteractionRecord | null> {
  return guard(async () => await db.maybeOne(sql.unsafe`SELECT ${COLUMNS} ${union(sessionId)} AND x.id = ${id}`) as InteractionRecord | null)
}

/** `participantId`: only that participant's MessageInteractions. */
export async function listInteractions(db: Db, sessionId: string, req: PageRequest, participantId?: string): Promise<Page<InteractionRecord & { key: string }>> {
  const only = participantId ? sql.fragment`AND x.kind = 'message-interaction' AND x.outbound_participant_id = ${participantId}` : sql.fragment``
  return guard(() => keysetPage(db, COLUMNS, sql.fragment`${union(sessionId)} ${only}`, sql.fragment`id`, req))
}

export async function deleteInteraction(db: Db, sessionId: string, id: string): Promise<boolean> {
  return guard(async () => {
    if ((await db.query(sql.unsafe`DELETE FROM twilio_interactions WHERE session_id = ${sessionId} AND id = ${id}`)).rowCount > 0) return true
    if (!await getInteraction(db, sessionId, id)) return false
    await db.query(sql.unsafe`INSERT INTO twilio_hidden_interactions (id, session_id) VALUES (${id}, ${sessionId}) ON CONFLICT DO NOTHING`)
    return true
  })
}

/**
 * Calls and SMS of the native sessions count as interactions of the open façade sessions `where`
 * selects: date_last_interaction follows the newest, `open` becomes `in-progress`, and a Ttl
 * expiry (no DateExpiry) is counted from it again, within the cap of `maxMinutes` from the start.
 */
export async function refreshActivity(db: Db, where: ReturnType<typeof sql.fragment>, maxMinutes: number, now: number): Promise<void> {
  await guard(() => db.query(sql.unsafe`
    UPDATE twilio_sessions s SET date_last_interaction = a.at, updated_at = ${ts(now)},
      status = CASE WHEN s.status = 'open' THEN 'in-progress' ELSE s.status END,
      expires_at = CASE WHEN s.date_expiry IS NULL AND s.ttl > 0
        THEN least(greatest(a.at, s.date_started) + make_interval(secs => s.ttl), s.date_started + make_interval(mins => ${maxMinutes})) ELSE s.expires_at END
    FROM (
      SELECT n.session_id, max(t.at) AS at FROM twilio_native_sessions n
      CROSS JOIN LATERAL (
        SELECT max(initiated_at) AS at FROM call_records WHERE session_id = n.native_id
        UNION ALL SELECT max(sent_at) FROM sms_records WHERE session_id = n.native_id) t
      WHERE n.session_id IN (SELECT id FROM twilio_sessions WHERE status IN ('open','in-progress') AND native_session_id IS NOT NULL AND ${where})
      GROUP BY n.session_id
    ) a
    WHERE s.id = a.session_id AND a.at IS NOT NULL AND (s.date_last_interaction IS NULL OR a.at > s.date_last_interaction)`))
}
