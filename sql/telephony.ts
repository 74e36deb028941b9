// Writes behind the provider callbacks that are not plain record upserts: the forwarded-SMS
// outcome, and the events + usage of calls and SMS (outbox and billing in one transaction).
import { sql } from 'slonik'
import type { EventEnvelope } from '../api/event-envelope.js'
import type { SmsStatus } from '../engine/types.js'
import { recordUsage, type UsageInput } from './billing.js'
import { insertOutbox } from './outbox.js'
import { transact, type Db } from './transaction.js'

export async function markSmsForwarded(db: Db, id: string, forwardMessageId: string | null, status: SmsStatus, at: number): Promise<void> {
  await db.query(sql.unsafe`
    UPDATE sms_records SET forward_message_id = COALESCE(${forwardMessageId}, forward_message_id), status = ${status},
      delivered_at = CASE WHEN ${status} = 'DELIVERED' THEN ${new Date(at).toISOString()}::timestamptz ELSE delivered_at END
    WHERE id = ${id} AND status = 'QUEUED'`)
}

/** One transaction for a batch of events and their usage (group commit). */
export async function writeEventsAndUsage(db: Db, envelopes: readonly EventEnvelope[], usage: readonly UsageInput[]): Promise<void> {
  await transact(db, async tx => {
    await insertOutbox(tx, envelopes)
    if (usage.length) await recordUsage(tx, usage)
  })
}

export async function proxyOfSession(db: Db, sessionId: string): Promise<string | null> {
  return await db.maybeOneFirst(sql.unsafe`SELECT proxy_number FROM sessions WHERE id = ${sessionId}`) as string | null
}
