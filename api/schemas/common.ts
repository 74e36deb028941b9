// Building blocks shared by every route schema (style 5). One TypeBox declaration drives
// validation, static types, the allow-list serializer and the OpenAPI document.
import { Type, type TSchema, type Static, type TUnsafe } from '@sinclair/typebox'

/** contract D2: E.164 syntax only, no spaces or punctuation. */
export const E164_PATTERN = '^\\+[1-9]\\d{6,14}$'
export const E164 = Type.String({ pattern: E164_PATTERN, description: 'E.164 phone number', examples: ['+12025550123'] })

export const Uuid = Type.String({ format: 'uuid' })
/** ISO 8601 UTC with milliseconds (contract D2). */
export const Timestamp = Type.String({ format: 'date-time' })
export const Email = Type.String({ format: 'email', minLength: 3, maxLength: 254 })
export const HttpUrl = Type.String({ format: 'uri', pattern: '^https?://', maxLength: 2048 })

/** A string enum as one `enum` keyword: one clear validation issue instead of an anyOf per literal. */
export function StringEnum<const T extends readonly string[]>(values: T, opts: { description?: string; default?: T[number] } = {}): TUnsafe<T[number]> {
  return Type.Unsafe<T[number]>({ type: 'string', enum: [...values], ...opts })
}

export function Nullable<T extends TSchema>(schema: T) {
  return Type.Union([schema, Type.Null()])
}

/** Contract 2.10: `{ data: [...], pagination: { count, after } }`. */
export function Envelope<T extends TSchema>(item: T) {
  return Type.Object({
    data: Type.Array(item),
    pagination: Type.Object({ count: Type.Integer({ minimum: 0 }), after: Nullable(Type.String()) }),
  })
}

/** Contract 8.5: `limit` with the endpoint's default and maximum. */
export function Limit(defaultLimit: number, max: number) {
  return Type.Optional(Type.Integer({ minimum: 1, maximum: max, default: defaultLimit }))
}

/** `limit` + `after` query properties for a cursor-paginated list. */
export function PageQuery(defaultLimit: number, max: number) {
  return {
    limit: Limit(defaultLimit, max),
    after: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
  }
}

export const Tier = StringEnum(['STARTER', 'GROWTH', 'ENTERPRISE'])
export const Role = StringEnum(['OWNER', 'ADMIN', 'OPERATOR'])
export const ExpiredCallBehavior = StringEnum(['DEAD_LINE', 'REDIRECT_SUPPORT', 'PLAY_MESSAGE'])
export const ConsentMode = StringEnum(['DEFAULT', 'CUSTOM', 'NONE'])
export const Platform = StringEnum(['ios', 'android'])

/** Contract 2.1. An allow-list: the salt and counters of the row never reach a response. */
/**
 * contract D11: a text the service sends from a proxy (STOP confirmation, HELP answer): at most two
 * SMS segments (2 × 160 characters), not blank.
 */
export const SmsReplyText = Type.String({ maxLength: 320, pattern: '\\S' })

export const TenantView = Type.Object({
  id: Uuid,
  name: Type.String(),
  tier: Tier,
  status: StringEnum(['ACTIVE', 'SUSPENDED']),
  webhookUrl: Nullable(Type.String()),
  defaultGracePeriod: Type.Integer(),
  expiredCallBehavior: ExpiredCallBehavior,
  supportPhone: Nullable(Type.String()),
  recordingEnabled: Type.Boolean(),
  recordingConsentMode: ConsentMode,
  recordingConsentAudioUrl: Nullable(Type.String()),
  pushConfig: Type.Object({}, { additionalProperties: true }),
  smsOptOutText: Nullable(Type.String({ description: 'Sent from the proxy to a party who texts STOP (contract D11); null: the default text' })),
  smsHelpText: Nullable(Type.String({ description: 'Sent from the proxy to a party who texts HELP or INFO (contract D11); null: the default text' })),
  createdAt: Timestamp,
  updatedAt: Timestamp,
})
export type TenantView = Static<typeof TenantView>

/** Contract 2.1: the user as auth responses show it. */
export const UserView = Type.Object({ id: Uuid, email: Type.String(), role: Role, tenantId: Uuid })
export type UserView = Static<typeof UserView>

/** Contract 7: the problem document, for the OpenAPI document. */
export const ProblemDocument = Type.Object({
  type: Type.String({ format: 'uri' }),
  title: Type.String(),
  status: Type.Integer(),
  detail: Type.String(),
  instance: Type.Optional(Type.String()),
  errors: Type.Optional(Type.Array(Type.Object({ field: Type.String(), issue: Type.String() }))),
})
