// Analytics (contract 4.5; contract D7: buckets are UTC hours or days, `ts` is the bucket start).
// Every analytics and billing report reads a period: `periodStart` inclusive, `periodEnd`
// exclusive, both ISO 8601 with an offset. The schema checks each bound on its own; what it
// cannot express (an instant Postgres takes, start before end) is checked by `periodOf` in
// api/routes/analytics.ts with `parseInstant` below.
import { Type, type Static } from '@sinclair/typebox'
import { StringEnum, Timestamp, Uuid } from './common.js'

export const METRIC_NAMES = ['session_created', 'call_minute', 'sms_sent', 'sms_received', 'recording_minute', 'number_rental'] as const
const CALL_STATUSES = ['RINGING', 'ANSWERED', 'COMPLETED', 'MISSED', 'FAILED'] as const
const CALL_DIRECTIONS = ['A_TO_B', 'B_TO_A'] as const
const GRANULARITIES = ['hour', 'day'] as const
export type Granularity = (typeof GRANULARITIES)[number]

// Ajv's `date-time` is RFC 3339: the offset (`Z` or `±hh[:mm]`) is required.
const InstantText = Type.String({ format: 'date-time', description: 'ISO 8601 with offset', examples: ['2026-11-01T00:00:00Z'] })

/** The period query properties, spread into each report's query schema. */
export const periodQueryProps = {
  periodStart: InstantText,
  periodEnd: InstantText,
}

export const PeriodQuery = Type.Object(periodQueryProps)

export const SeriesQuery = Type.Object({
  ...periodQueryProps,
  granularity: Type.Optional(StringEnum(GRANULARITIES, { default: 'day' })),
})
export type SeriesQuery = Static<typeof SeriesQuery>

export const CallsSummaryQuery = Type.Object({
  ...periodQueryProps,
  status: Type.Optional(StringEnum(CALL_STATUSES)),
  direction: Type.Optional(StringEnum(CALL_DIRECTIONS)),
})
export type CallsSummaryQuery = Static<typeof CallsSummaryQuery>

const Count = Type.Integer({ minimum: 0 })

/** Contract 4.5 usage; also GET /v1/billing/usage (contract 4.6). All six metrics are always present. */
export const UsageView = Type.Object({
  tenantId: Uuid,
  periodStart: Timestamp,
  periodEnd: Timestamp,
  metrics: Type.Object(Object.fromEntries(METRIC_NAMES.map(m => [m, Type.Integer()])) as Record<(typeof METRIC_NAMES)[number], ReturnType<typeof Type.Integer>>),
  totalEvents: Count,
})
export type UsageView = Static<typeof UsageView>

export const SessionsBucket = Type.Object({
  ts: Timestamp,
  count: Count,
  poolExhausted: Type.Optional(Type.Integer({
    minimum: 1,
    description: 'contract D12: creates refused with 503 pool-exhausted in this bucket (counted per UTC hour); absent when none',
  })),
})
export const SessionsOverTime = Type.Array(SessionsBucket)
export type SessionsBucket = Static<typeof SessionsBucket>

export const CallSuccessBucket = Type.Object({
  ts: Timestamp,
  total: Count,
  answered: Count,
  completed: Count,
  missed: Count,
  failed: Count,
  /** (answered + completed) / total, 4 decimal places. */
  rate: Type.Number({ minimum: 0, maximum: 1 }),
})
export const CallSuccessRate = Type.Array(CallSuccessBucket)
export type CallSuccessBucket = Static<typeof CallSuccessBucket>

export const CallsSummary = Type.Object({
  periodStart: Timestamp,
  periodEnd: Timestamp,
  total: Count,
  /** Mean durationSeconds of the calls counted in `total`, 2 decimal places; 0 without calls. */
  avgDurationSeconds: Type.Number({ minimum: 0 }),
  byStatus: Type.Array(Type.Object({ status: StringEnum(CALL_STATUSES), count: Count })),
  byDirection: Type.Array(Type.Object({ direction: StringEnum(CALL_DIRECTIONS), count: Count })),
})
export type CallsSummary = Static<typeof CallsSummary>

/** A period bound, exact to the microsecond (Postgres' precision). */
export interface Instant {
  ms: number
  /** Microseconds past `ms`, 0-999. */
  micros: number
  /** `YYYY-MM-DDTHH:MM:SS.ffffffZ`: what SQL compares against. */
  sql: string
  /** Milliseconds, ISO 8601 UTC (contract D2): what responses echo. */
  iso: string
}

// What Ajv's `date-time` accepts (RFC 3339: `T` or a space, any case, offset required).
const RFC3339 = /^(\d{4})-(\d\d)-(\d\d)[Tt\s](\d\d):(\d\d):(\d\d)(?:\.(\d+))?(?:[Zz]|([+-])(\d\d)(?::?(\d\d))?)$/

function utc(year: number, month: number, day: number): Date {
  const d = new Date(0)
  d.setUTCFullYear(year, month - 1, day) // not Date.UTC: it maps years 0-99 to 1900-1999
  return d
}

const MIN_MS = utc(1, 1, 1).getTime()
const MAX_MS = utc(10000, 1, 1).getTime() - 1

/**
 * An RFC 3339 instant, or null when it is malformed or outside 0001-9999 UTC (Postgres refuses
 * year 0; ISO strings beyond 9999 need an expanded year). A leap second `:60` rolls into the next
 * minute, as Postgres does. Digits finer than a microsecond are dropped.
 */
export function parseInstant(text: string): Instant | null {
  const m = RFC3339.exec(text)
  if (!m) return null
  const [year, month, day, h, min, sec] = [m[1], m[2], m[3], m[4], m[5], m[6]].map(Number) as [number, number, number, number, number, number]
  const offH = Number(m[9] ?? 0), offM = Number(m[10] ?? 0)
  if (h > 23 || min > 59 || sec > 60 || offH > 23 || offM > 59) return null
  const date = utc(year, month, day)
  if (date.getUTCMonth() !== month - 1 || date.getUTCDate() !== day) return null // 2026-02-30
  const fraction = (m[7] ?? '').slice(0, 6).padEnd(6, '0')
  let ms = date.getTime() + ((h * 60 + min) * 60 + sec) * 1000 + Number(fraction.slice(0, 3))
  if (m[8]) ms -= (m[8] === '+' ? 1 : -1) * (offH * 60 + offM) * 60_000
  if (!Number.isFinite(ms) || ms < MIN_MS || ms > MAX_MS) return null
  const iso = new Date(ms).toISOString()
  return { ms, micros: Number(fraction.slice(3)), sql: `${iso.slice(0, -1)}${fraction.slice(3)}Z`, iso }
}

/** Negative, zero or positive as `a` is before, at or after `b`. */
export function compareInstants(a: Instant, b: Instant): number {
  return a.ms - b.ms || a.micros - b.micros
}
