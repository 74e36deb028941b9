// The durable outbox (DECISIONS 6): events are written in the same transaction as the change that
// causes them, so an event exists exactly when its change committed. Delivery is the webhook
// dispatcher's job (sql/webhooks.ts). Envelope ids are the primary key: writing one twice is a
// no-op.
import { sql, type CommonQueryMethods, type SerializableValue } from 'slonik'
import type { EventEnvelope } from '../api/event-envelope.js'

const UUID_PATTERN = '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$'

/** `sessionId` defaults to each envelope's data.sessionId when that is a UUID. */
export async function insertOutbox(tx: CommonQueryMethods, envelopes: readonly EventEnvelope[], sessionId?: string): Promise<void> {
  if (envelopes.length === 0) return
  await tx.query(sql.unsafe`
    INSERT INTO outbox (id, tenant_id, session_id, type, envelope, created_at, next_attempt_at)
    SELECT (e->>'id')::uuid,
           (e->'data'->>'tenantId')::uuid,
           COALESCE(${sessionId ?? null}::uuid,
                    CASE WHEN e->'data'->>'sessionId' ~ ${UUID_PATTERN} THEN (e->'data'->>'sessionId')::uuid END),
           e->>'type',
           e,
           (e->>'createdAt')::timestamptz,
           now()
    FROM jsonb_array_elements(${sql.jsonb(envelopes as unknown as SerializableValue)}) AS e
    ON CONFLICT (id) DO NOTHING`)
}
