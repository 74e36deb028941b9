// Contract 4.5: analytics reports of the caller's tenant over a period. Aggregation happens in
// Postgres (sql/analytics.ts, sql/billing.ts usageTotals); this module checks the period and
// shapes the replies.
import { route, ApiProblem, type RouteDef } from '../route.js'
import {
  CallsSummary, CallsSummaryQuery, CallSuccessRate, PeriodQuery, SeriesQuery, SessionsOverTime, UsageView,
  compareInstants, parseInstant, type Instant, type UsageView as Usage,
} from '../schemas/analytics.js'
import type { FieldIssue } from '../problems.js'
import { callsSummary, callSuccessRate, sessionsOverTime } from '../../sql/analytics.js'
import { usageTotals } from '../../sql/billing.js'
import type { Db } from '../../sql/transaction.js'

const PROBLEMS = ['validation', 'unauthorized', 'forbidden', 'rate-limit'] as const

export interface Period { start: Instant; end: Instant }

/**
 * The period of an analytics or billing query, whose bounds the schema already checked one by
 * one: both must be real instants (years 0001-9999) and start must come before end, since the
 * end is exclusive and an empty period is a client mistake, not an empty report.
 */
export function periodOf(q: { periodStart: string; periodEnd: string }): Period {
  const start = parseInstant(q.periodStart)
  const end = parseInstant(q.periodEnd)
  const errors: FieldIssue[] = []
  if (!start) errors.push({ field: 'periodStart', issue: 'out_of_range' })
  if (!end) errors.push({ field: 'periodEnd', issue: 'out_of_range' })
  if (start && end && compareInstants(start, end) >= 0) errors.push({ field: 'periodEnd', issue: 'not_after_period_start' })
  if (errors.length || !start || !end) throw new ApiProblem('validation', 'periodStart must be before periodEnd, both ISO 8601 with an offset', { errors })
  return { start, end }
}

function tenantOf(req: { auth: { tenantId: string } | null }): string {
  return req.auth!.tenantId
}

/** Contract 4.5 usage, also served as GET /v1/billing/usage (contract 4.6). */
export async function usageReport(db: Db, tenantId: string, period: Period): Promise<Usage> {
  const { metrics, totalEvents } = await usageTotals(db, tenantId, period.start.sql, period.end.sql)
  return { tenantId, periodStart: period.start.iso, periodEnd: period.end.iso, metrics, totalEvents }
}

export const analyticsRoutes: RouteDef[] = [
  route({
    method: 'GET', path: '/v1/analytics/usage', auth: 'tenant', summary: 'Usage per metric over a period',
    query: PeriodQuery, response: { 200: UsageView }, problems: PROBLEMS,
    async handler(req) {
      return { status: 200, body: await usageReport(req.services.db, tenantOf(req), periodOf(req.query)) }
    },
  }),
  route({
    method: 'GET', path: '/v1/analytics/sessions-over-time', auth: 'tenant', summary: 'Sessions created per UTC hour or day',
    query: SeriesQuery, response: { 200: SessionsOverTime }, problems: PROBLEMS,
    async handler(req) {
      const { start, end } = periodOf(req.query)
      const granularity = req.query.granularity ?? 'day'
      return { status: 200, body: await sessionsOverTime(req.services.db, { tenantId: tenantOf(req), from: start.sql, to: end.sql, granularity }) }
    },
  }),
  route({
    method: 'GET', path: '/v1/analytics/call-success-rate', auth: 'tenant', summary: 'Call outcomes and success rate per UTC hour or day',
    query: SeriesQuery, response: { 200: CallSuccessRate }, problems: PROBLEMS,
    async handler(req) {
      const { start, end } = periodOf(req.query)
      const granularity = req.query.granularity ?? 'day'
      return { status: 200, body: await callSuccessRate(req.services.db, { tenantId: tenantOf(req), from: start.sql, to: end.sql, granularity }) }
    },
  }),
  route({
    method: 'GET', path: '/v1/analytics/calls', auth: 'tenant', summary: 'Call totals by status and direction over a period',
    query: CallsSummaryQuery, response: { 200: CallsSummary }, problems: PROBLEMS,
    async handler(req) {
      const { start, end } = periodOf(req.query)
      const summary = await callsSummary(req.services.db, {
        tenantId: tenantOf(req), from: start.sql, to: end.sql, status: req.query.status, direction: req.query.direction,
      })
      return { status: 200, body: { periodStart: start.iso, periodEnd: end.iso, ...summary } }
    },
  }),
]
