// Call and SMS records (contract 2.3, 2.4). SMS records carry metadata only: there is no text field.
import { Type } from '@sinclair/typebox'
import { Timestamp } from './common.js'

const Nullable = <T extends ReturnType<typeof Type.String>>(s: T) => Type.Union([s, Type.Null()])

export const CallView = Type.Object({
  id: Type.String(),
  sessionId: Type.String(),
  status: Type.Union(['RINGING', 'ANSWERED', 'COMPLETED', 'MISSED', 'FAILED'].map(s => Type.Literal(s))),
  direction: Type.Union([Type.Literal('A_TO_B'), Type.Literal('B_TO_A')]),
  durationSeconds: Type.Integer(),
  initiatedAt: Timestamp,
  answeredAt: Nullable(Timestamp),
  endedAt: Nullable(Timestamp),
  recordingUrl: Nullable(Type.String()),
})

export const CallWithConsentView = Type.Composite([CallView, Type.Object({ recordingConsentPlayed: Type.Boolean() })])

export const SmsView = Type.Object({
  id: Type.String(),
  sessionId: Type.String(),
  direction: Type.Union([Type.Literal('A_TO_B'), Type.Literal('B_TO_A')]),
  status: Type.Union(['QUEUED', 'SENT', 'DELIVERED', 'FAILED'].map(s => Type.Literal(s))),
  sentAt: Timestamp,
  deliveredAt: Nullable(Timestamp),
  reason: Nullable(Type.String({
    description: 'contract D11: why a FAILED message was dropped before reaching the provider: `opted_out` (the recipient texted STOP to this proxy) or `channel` (the session carries voice only); null otherwise',
  })),
})

/** Contract 8.5: calls and SMS lists page alike (default 50, max 200). */
export const RecordListQuery = Type.Object({
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 50 })),
  after: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
})
