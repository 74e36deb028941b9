// Contract 4.6: billing reads of the caller's tenant (tenant token only). Metering itself happens
// where usage occurs (sql/billing.ts recordUsage); this module only reads.
import { route, ApiProblem, type RouteDef } from '../route.js'
import { Envelope } from '../schemas/common.js'
import { PeriodQuery, UsageView } from '../schemas/analytics.js'
import { BillingEventsQuery, BillingEventsView, PeriodsQuery, PeriodView, PricingList } from '../schemas/billing.js'
import { listBillingEvents, listPeriods, listPricing } from '../../sql/billing.js'
import { periodOf, usageReport } from './analytics.js'

const PROBLEMS = ['validation', 'unauthorized', 'forbidden', 'rate-limit'] as const

function tenantOf(req: { auth: { tenantId: string } | null }): string {
  return req.auth!.tenantId
}

export const billingRoutes: RouteDef[] = [
  route({
    method: 'GET', path: '/v1/billing/usage', auth: 'tenant', summary: 'Usage per metric over a period (as /v1/analytics/usage)',
    query: PeriodQuery, response: { 200: UsageView }, problems: PROBLEMS,
    async handler(req) {
      return { status: 200, body: await usageReport(req.services.db, tenantOf(req), periodOf(req.query)) }
    },
  }),
  route({
    method: 'GET', path: '/v1/billing/events', auth: 'tenant', summary: 'Raw billing events of a period, oldest first (offset paging)',
    query: BillingEventsQuery, response: { 200: BillingEventsView }, problems: PROBLEMS,
    async handler(req) {
      const { start, end } = periodOf(req.query)
      const events = await listBillingEvents(req.services.db, {
        tenantId: tenantOf(req), periodStart: start.sql, periodEnd: end.sql,
        ...(req.query.metric ? { metric: req.query.metric } : {}),
        limit: req.query.limit ?? 100, offset: req.query.offset ?? 0,
      })
      return { status: 200, body: { events } }
    },
  }),
  route({
    method: 'GET', path: '/v1/billing/periods', auth: 'tenant', summary: 'Billing periods (calendar months, UTC), newest first',
    query: PeriodsQuery, response: { 200: Envelope(PeriodView) }, problems: PROBLEMS,
    async handler(req) {
      const page = await listPeriods(req.services.db, { tenantId: tenantOf(req), limit: req.query.limit ?? 12, after: req.query.after })
      if (page === 'bad-cursor') throw new ApiProblem('validation', 'after is not a billing period id', { errors: [{ field: 'after', issue: 'invalid_cursor' }] })
      return { status: 200, body: { data: page.data, pagination: { count: page.data.length, after: page.after } } }
    },
  }),
  route({
    method: 'GET', path: '/v1/billing/pricing', auth: 'tenant', summary: 'Current price list, every tier and metric',
    response: { 200: PricingList }, problems: ['unauthorized', 'forbidden', 'rate-limit'],
    async handler(req) {
      return { status: 200, body: { tiers: await listPricing(req.services.db) } }
    },
  }),
]
