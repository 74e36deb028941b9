// Shared vocabulary of the engine. Spec names are used verbatim (style 2): enums are `as const`
// objects plus a union type. Times are epoch milliseconds (numbers); the engine never reads a
// clock itself, it is handed `now`.

declare const brand: unique symbol
export type Brand<T, B extends string> = T & { readonly [brand]: B }

export type SessionId = Brand<string, 'SessionId'>
export type TenantId = Brand<string, 'TenantId'>
/** A syntactically valid E.164 number (`^\+[1-9]\d{6,14}$`), checked at the edge. */
export type E164 = Brand<string, 'E164'>
/** Hex HMAC-SHA256 of a party number under the tenant's salt (contract D2). */
export type PartyHash = Brand<string, 'PartyHash'>

export const SessionState = {
  PENDING: 'PENDING',
  ACTIVE: 'ACTIVE',
  GRACE_PERIOD: 'GRACE_PERIOD',
  EXPIRED: 'EXPIRED',
  FAILED: 'FAILED',
} as const
export type SessionState = (typeof SessionState)[keyof typeof SessionState]
/** States that count against the concurrent-session quota (contract 8.2). */
export const LIVE_STATES: readonly SessionState[] = ['PENDING', 'ACTIVE', 'GRACE_PERIOD']

export const DirectionMode = {
  BIDIRECTIONAL: 'BIDIRECTIONAL',
  A_TO_B_ONLY: 'A_TO_B_ONLY',
  B_TO_A_ONLY: 'B_TO_A_ONLY',
} as const
export type DirectionMode = (typeof DirectionMode)[keyof typeof DirectionMode]

export const CallDirection = { A_TO_B: 'A_TO_B', B_TO_A: 'B_TO_A' } as const
export type CallDirection = (typeof CallDirection)[keyof typeof CallDirection]

export const ConsentPrompt = { DEFAULT: 'DEFAULT', CUSTOM: 'CUSTOM', NONE: 'NONE' } as const
export type ConsentPrompt = (typeof ConsentPrompt)[keyof typeof ConsentPrompt]

export const ExpiredCallBehavior = {
  DEAD_LINE: 'DEAD_LINE',
  REDIRECT_SUPPORT: 'REDIRECT_SUPPORT',
  PLAY_MESSAGE: 'PLAY_MESSAGE',
} as const
export type ExpiredCallBehavior = (typeof ExpiredCallBehavior)[keyof typeof ExpiredCallBehavior]

export const Tier = { STARTER: 'STARTER', GROWTH: 'GROWTH', ENTERPRISE: 'ENTERPRISE' } as const
export type Tier = (typeof Tier)[keyof typeof Tier]

/** Contract 8: requests per minute and concurrent sessions per tier. */
export const TIER_LIMITS: Readonly<Record<Tier, { requestsPerMinute: number; concurrentSessions: number }>> = {
  STARTER: { requestsPerMinute: 100, concurrentSessions: 100 },
  GROWTH: { requestsPerMinute: 500, concurrentSessions: 1_000 },
  ENTERPRISE: { requestsPerMinute: 2_000, concurrentSessions: 10_000 },
}

export const CallStatus = {
  RINGING: 'RINGING',
  ANSWERED: 'ANSWERED',
  COMPLETED: 'COMPLETED',
  MISSED: 'MISSED',
  FAILED: 'FAILED',
} as const
export type CallStatus = (typeof CallStatus)[keyof typeof CallStatus]

/**
 * The channels a session carries (contract D10), as a bitmask: a voice call on a session without
 * VOICE is refused, an SMS on one without SMS is blocked. Both by default.
 */
export const Channel = { VOICE: 1, SMS: 2 } as const
export const ALL_CHANNELS = 3

export const SmsStatus = { QUEUED: 'QUEUED', SENT: 'SENT', DELIVERED: 'DELIVERED', FAILED: 'FAILED' } as const
export type SmsStatus = (typeof SmsStatus)[keyof typeof SmsStatus]

/** What the engine needs to know of a tenant to route (kept in memory, shared by its sessions). */
export interface TenantRouting {
  id: TenantId
  tier: Tier
  expiredCallBehavior: ExpiredCallBehavior
  supportPhone: E164 | null
  recordingConsentAudioUrl: string | null
}

/**
 * The persisted session (contract 2.2 plus the real numbers and a version for optimistic
 * concurrency). Real numbers never leave the process except to the telephony provider.
 */
export interface SessionRecord {
  id: SessionId
  tenantId: TenantId
  /** The agent's proxy: the number the agent dials, and the customer's traffic is presented from. */
  proxyNumber: E164
  /**
   * A dual-proxy session (docs/dual-proxy.md): the customer's proxy, when it differs from the
   * agent's. Absent: the customer uses proxyNumber too (every session the native API creates).
   */
  customerProxyNumber?: E164
  state: SessionState
  directionMode: DirectionMode
  gracePeriodMinutes: number
  maxDurationMinutes: number
  recordingEnabled: boolean
  consentPrompt: ConsentPrompt
  agentPhone: E164
  customerPhone: E164
  createdAt: number
  activatedAt: number
  expiresAt: number
  endedAt: number | null
  expiredAt: number | null
  version: number
  /** Channel bits (contract D10); absent: both. */
  channels?: number
  /**
   * contract D10: an ACTIVE session with no call or SMS for this long ends as POST /end would
   * (grace applies); absent or null: never.
   */
  inactivityTimeoutMinutes?: number | null
}
