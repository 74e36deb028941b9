// Session schemas (contract 2.2, 4.2): the single source of validation, types, serialization and
// the OpenAPI document. SessionView is an allow-list: party numbers are not in it, so the
// serializer cannot emit them.
import { Type, type Static } from '@sinclair/typebox'
import { E164, Timestamp, Uuid } from './common.js'

const State = Type.Union([Type.Literal('PENDING'), Type.Literal('ACTIVE'), Type.Literal('GRACE_PERIOD'), Type.Literal('EXPIRED'), Type.Literal('FAILED')])
const Mode = Type.Union([Type.Literal('BIDIRECTIONAL'), Type.Literal('A_TO_B_ONLY'), Type.Literal('B_TO_A_ONLY')])
const Consent = Type.Union([Type.Literal('DEFAULT'), Type.Literal('CUSTOM'), Type.Literal('NONE')])

// contract D4: Stripe-like metadata bounds; flat values only.
export const Metadata = Type.Record(
  Type.String({ minLength: 1, maxLength: 40 }),
  Type.Union([Type.String({ maxLength: 500 }), Type.Number(), Type.Boolean(), Type.Null()]),
  { maxProperties: 50 },
)
export const METADATA_MAX_BYTES = 4096

const GraceMinutes = Type.Integer({ minimum: 0, maximum: 10080 })
const MaxDurationMinutes = Type.Integer({ minimum: 1, maximum: 10080 })

// Optional session settings (contract D10); their defaults keep the core behaviour.
const InactivityMinutes = Type.Integer({
  minimum: 1, maximum: 10080,
  description: 'contract D10: an ACTIVE session with no call or SMS for this many minutes ends as POST /v1/sessions/:id/end would (grace applies), once, on any node',
})
const ChannelName = Type.Union([Type.Literal('voice'), Type.Literal('sms')])
const Channels = Type.Array(ChannelName, {
  minItems: 1, maxItems: 2, uniqueItems: true,
  description: 'contract D10: the channels the session carries (default both): a call on an SMS-only session is rejected and recorded FAILED; an SMS on a voice-only session is recorded FAILED (reason `channel`) and reported by sms.blocked',
})

export const CreateSessionBody = Type.Object({
  agentPhone: E164,
  customerPhone: E164,
  metadata: Type.Optional(Metadata),
  gracePeriodMinutes: Type.Optional(GraceMinutes),
  directionMode: Type.Optional(Mode),
  maxDurationMinutes: Type.Optional(MaxDurationMinutes),
  recordingEnabled: Type.Optional(Type.Boolean()),
  consentPrompt: Type.Optional(Consent),
  stickyProxy: Type.Optional(Type.Boolean({
    description: 'contract D10: reuse the proxy this agent and customer had with the tenant in the last 30 days when it can carry the session (the overlap rule holds); otherwise a proxy is allocated as usual',
  })),
  inactivityTimeoutMinutes: Type.Optional(InactivityMinutes),
  channels: Type.Optional(Channels),
})
export type CreateSessionBody = Static<typeof CreateSessionBody>

// Contract 4.2: unknown fields are rejected on PATCH /v1/sessions/:id.
export const PatchSessionBody = Type.Object({
  metadata: Type.Optional(Metadata),
  gracePeriodMinutes: Type.Optional(GraceMinutes),
  // contract D10: a change restarts the inactivity clock; null switches the timeout off.
  inactivityTimeoutMinutes: Type.Optional(Type.Union([InactivityMinutes, Type.Null()])),
}, { additionalProperties: false })
export type PatchSessionBody = Static<typeof PatchSessionBody>

export const SwapTargetBody = Type.Object({ customerPhone: E164 })
export type SwapTargetBody = Static<typeof SwapTargetBody>

export const SessionIdParams = Type.Object({ id: Uuid })

export const SessionView = Type.Object({
  id: Uuid,
  tenantId: Uuid,
  proxyNumber: Type.String(),
  state: State,
  directionMode: Mode,
  metadata: Type.Record(Type.String(), Type.Unknown()),
  gracePeriodMinutes: Type.Integer(),
  maxDurationMinutes: Type.Integer(),
  recordingEnabled: Type.Boolean(),
  consentPrompt: Consent,
  expiresAt: Timestamp,
  createdAt: Timestamp,
  activatedAt: Timestamp,
  endedAt: Type.Union([Timestamp, Type.Null()]),
  expiredAt: Type.Union([Timestamp, Type.Null()]),
  callCount: Type.Integer(),
  lastCallAt: Type.Union([Timestamp, Type.Null()]),
  // contract D10, additive (optional: an Idempotency-Key replay of an answer stored before them has neither).
  channels: Type.Optional(Type.Array(ChannelName)),
  inactivityTimeoutMinutes: Type.Optional(Type.Union([Type.Integer(), Type.Null()])),
})
export type SessionView = Static<typeof SessionView>

export const ListSessionsQuery = Type.Object({
  state: Type.Optional(State),
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 20 })),
  after: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
})

export const VerifyQuery = Type.Object({ userPhone: E164 })
export const VerifyResult = Type.Union([
  Type.Object({ verified: Type.Literal(true), sessionId: Uuid, proxyNumber: Type.String(), metadata: Type.Record(Type.String(), Type.Unknown()) }),
  Type.Object({ verified: Type.Literal(false) }),
])
