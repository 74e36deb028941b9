// Writes behind the provider callbacks that are not plain record upserts: the forwarded-SMS
// outcome, and the events + usage of calls and SMS (outbox and billing in one statement).
import { sql } from 'slonik'
import type { EventEnvelope } from '../api/event-envelope.js'
import type { SmsStatus } from '../engine/types.js'
import { finishUsage, usageCtes, usageOutcome, usageRows, type UsageInput, type UsageOutcome } from './billing.js'
import { guard } from './errors.js'
import { insertOutbox, outboxInsert } from './outbox.js'
import { transact, type Db } from './transaction.js'

export async function markSmsForwarded(db: Db, id: string, forwardMessageId: string | null, status: SmsStatus, at: number): Promise<void> {
  await db.query(sql.unsafe`
    UPDATE sms_records SET forward_message_id = COALESCE(${forwardMessageId}, forward_message_id), status = ${status},
      delivered_at = CASE WHEN ${status} = 'DELIVERED' THEN ${new Date(at).toISOString()}::timestamptz ELSE delivered_at END
    WHERE id = ${id} AND status = 'QUEUED'`)
}

/**
 * A batch of events and their usage (group commit) in one statement: one round trip and atomic
 * without BEGIN/COMMIT. Only the first usage of a tenant in a month (its period does not exist
 * yet) takes a transaction of its own to open the period and add those rows.
 */
export async function writeEventsAndUsage(db: Db, envelopes: readonly EventEnvelope[], usage: readonly UsageInput[]): Promise<void> {
  if (usage.length === 0) return guard(() => insertOutbox(db, envelopes))
  const rows = usageRows(usage)
  const out = await guard(async () => (await db.one(sql.unsafe`
    WITH outbox_ins AS (${outboxInsert(envelopes)}), ${usageCtes(rows)}
    SELECT ${usageOutcome}`)) as unknown as UsageOutcome)
  if (out.usage_missing.length) await transact(db, tx => finishUsage(tx, usage, rows, out))
}

export async function proxyOfSession(db: Db, sessionId: string): Promise<string | null> {
  return await db.maybeOneFirst(sql.unsafe`SELECT proxy_number FROM sessions WHERE id = ${sessionId}`) as string | null
}
