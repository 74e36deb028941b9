// Billing (contract 2.5-2.7, 4.6, 8.5; contract D7). Billing events are the one snake_case resource
// of the API (contract 2.5): quantities and prices are decimal strings, never floats. Pricing rows
// are camelCase with numeric prices (contract 2.7).
import { Type, type Static } from '@sinclair/typebox'
import { Limit, Nullable, StringEnum, Tier, Timestamp, Uuid } from './common.js'
import type { Metric as StoreMetric } from '../../sql/billing.js'
import { METRIC_NAMES, periodQueryProps } from './analytics.js'

export const Metric = StringEnum(METRIC_NAMES)

// The API's metric names and the store's are one set (contract 2.5): a drift breaks the build here.
type Subset<T extends U, U> = T
export type MetricsAgree = [Subset<StoreMetric, (typeof METRIC_NAMES)[number]>, Subset<(typeof METRIC_NAMES)[number], StoreMetric>]

/** A decimal as Postgres prints it after trim_scale: `2`, `0.005`, `1.5`. */
const Decimal = Type.String({ pattern: '^-?\\d+(\\.\\d+)?$' })

export const BillingEventsQuery = Type.Object({
  ...periodQueryProps,
  metric: Type.Optional(Metric),
  limit: Limit(100, 500),
  // Postgres takes a bigint OFFSET; an int4 bound keeps absurd values a 400, not a 500.
  offset: Type.Optional(Type.Integer({ minimum: 0, maximum: 2_147_483_647, default: 0 })),
})
export type BillingEventsQuery = Static<typeof BillingEventsQuery>

/** Contract 2.5, raw and snake_case. */
const BillingEventView = Type.Object({
  id: Uuid,
  tenant_id: Uuid,
  billing_period_id: Uuid,
  metric: Metric,
  quantity: Decimal,
  unit_price: Nullable(Decimal),
  recorded_at: Timestamp,
  session_id: Nullable(Uuid),
  call_record_id: Nullable(Uuid),
  metadata: Type.Object({}, { additionalProperties: true }),
})

export const BillingEventsView = Type.Object({ events: Type.Array(BillingEventView) })

export const PeriodsQuery = Type.Object({
  limit: Limit(12, 24),
  after: Type.Optional(Type.String({ format: 'uuid', description: 'id of the last period of the previous page' })),
})
export type PeriodsQuery = Static<typeof PeriodsQuery>

/** Contract 2.6. */
export const PeriodView = Type.Object({
  id: Uuid,
  periodStart: Timestamp,
  periodEnd: Timestamp,
  status: StringEnum(['ACTIVE', 'CLOSED']),
  createdAt: Timestamp,
  closedAt: Nullable(Timestamp),
})

/** Contract 2.7: effectiveUntil null = the current row. */
export const PricingView = Type.Object({
  id: Uuid,
  tier: Tier,
  metric: Metric,
  unitPrice: Type.Number(),
  includedQuantity: Type.Number(),
  overagePrice: Type.Number(),
  currency: Type.String(),
  effectiveFrom: Timestamp,
  effectiveUntil: Nullable(Timestamp),
})

export const PricingList = Type.Object({ tiers: Type.Array(PricingView) })
