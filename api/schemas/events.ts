// contract D6: the event envelope as a schema, for the OpenAPI document (the WebSocket stream's
// messages and the webhook bodies). The envelope itself is built in sql/vocabulary/event-envelope.ts
// from an allow-list of `data` fields; test/gateway/openapi.test.ts checks every kind it builds
// against this schema, so the two cannot drift apart.
import { Type } from '@sinclair/typebox'
import { EVENT_TYPES } from '../../sql/vocabulary/event-envelope.js'
import { StringEnum, Timestamp, Uuid } from './common.js'

export const EventEnvelopeSchema = Type.Object({
  id: Type.String({ format: 'uuid', description: 'UUIDv7: ids order events in time; the same id on every redelivery' }),
  type: StringEnum(EVENT_TYPES),
  createdAt: Timestamp,
  data: Type.Object({
    sessionId: Type.Optional(Type.String({ format: 'uuid', description: 'Every event but pool.low' })),
    tenantId: Uuid,
    proxyNumber: Type.Optional(Type.String({ description: 'The proxy number (never a party number); every event but pool.low' })),
    state: Type.Optional(Type.String({ description: 'session.*: the session state; pool.low: LOW or RECOVERED' })),
    timestamp: Type.Optional(Timestamp),
    callId: Type.Optional(Uuid),
    direction: Type.Optional(Type.String({ description: 'call.* and sms.*' })),
    status: Type.Optional(Type.String({ description: 'call.* and sms.*' })),
    durationSeconds: Type.Optional(Type.Integer({ minimum: 0 })),
    smsId: Type.Optional(Uuid),
    reason: Type.Optional(Type.String({ description: 'sms.blocked: opted_out (the sender texted STOP to this proxy) or channel (the session carries voice only)' })),
    region: Type.Optional(Type.String({ description: 'pool.low: the region of the proxy numbers' })),
    threshold: Type.Optional(Type.Integer({ description: 'pool.low: the free share crossed, in percent: 20, 10 or 5 going down (LOW), 25 on recovery (RECOVERED)' })),
    total: Type.Optional(Type.Integer({ minimum: 0, description: 'pool.low: proxy numbers in the region' })),
    available: Type.Optional(Type.Integer({ minimum: 0, description: 'pool.low: free numbers (not in use, not cooling down)' })),
    inUse: Type.Optional(Type.Integer({ minimum: 0, description: 'pool.low: numbers with a live session' })),
    cooldown: Type.Optional(Type.Integer({ minimum: 0, description: 'pool.low: numbers released less than NUMBER_COOLDOWN_SECONDS ago' })),
    test: Type.Optional(Type.Literal(true, { description: 'A test delivery (POST /v1/webhooks/:id/test)' })),
  }, { additionalProperties: false }),
}, { additionalProperties: false })
