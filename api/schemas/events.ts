// DECISIONS 6: the event envelope as a schema, for the OpenAPI document (the WebSocket stream's
// messages and the webhook bodies). The envelope itself is built in api/vocabulary/event-envelope.ts
// from an allow-list of `data` fields; test/gateway/openapi.test.ts checks every kind it builds
// against this schema, so the two cannot drift apart.
import { Type } from '@sinclair/typebox'
import { EVENT_TYPES } from '../vocabulary/event-envelope.js'
import { StringEnum, Timestamp, Uuid } from './common.js'

export const EventEnvelopeSchema = Type.Object({
  id: Type.String({ format: 'uuid', description: 'UUIDv7: ids order events in time; the same id on every redelivery' }),
  type: StringEnum(EVENT_TYPES),
  createdAt: Timestamp,
  data: Type.Object({
    sessionId: Uuid,
    tenantId: Uuid,
    proxyNumber: Type.String({ description: 'The proxy number (never a party number)' }),
    state: Type.Optional(Type.String({ description: 'session.*: the session state' })),
    timestamp: Type.Optional(Timestamp),
    callId: Type.Optional(Uuid),
    direction: Type.Optional(Type.String({ description: 'call.* and sms.*' })),
    status: Type.Optional(Type.String({ description: 'call.* and sms.*' })),
    durationSeconds: Type.Optional(Type.Integer({ minimum: 0 })),
    smsId: Type.Optional(Uuid),
    reason: Type.Optional(Type.String({ description: 'sms.blocked: opted_out (the sender texted STOP to this proxy) or channel (the session carries voice only)' })),
    test: Type.Optional(Type.Literal(true, { description: 'A test delivery (POST /v1/webhooks/:id/test)' })),
  }, { additionalProperties: false }),
}, { additionalProperties: false })
