// Every HTTP route the service serves, in one table: the maskline API (and the operator console's
// view of it, and the OpenAPI document that lists them), the provider callbacks, and the Twilio
// Proxy v1 façade under /proxy (not in the OpenAPI document: Twilio's own describes it).
import type { Redis } from 'ioredis'
import { sql } from 'slonik'
import type { RouteDef } from '../api/route.js'
import { analyticsRoutes } from '../api/routes/analytics.js'
import { authRoutes } from '../api/routes/auth.js'
import { billingRoutes } from '../api/routes/billing.js'
import { configRoutes } from '../api/routes/config.js'
import { deviceRoutes } from '../api/routes/devices.js'
import { healthRoutes, readinessRoute, type HealthChecks, type Readiness } from '../api/routes/health.js'
import { numberRoutes } from '../api/routes/numbers.js'
import { openapiRoute } from '../api/routes/openapi.js'
import { callRoutes, sessionRoutes } from '../api/routes/sessions.js'
import { webhookRoutes } from '../api/routes/webhooks.js'
import { consoleRoutes } from '../api/routes/console.js'
import { twilioProxyRoutes } from '../api/twilio-proxy/router.js'
import { twilioCredentialRoutes } from '../api/twilio-proxy/credentials-route.js'
import { orAfter } from '../api/app/deadline.js'
import type { Database } from '../sql/db.js'
import type { Facade } from './facade.js'

const sqlPing = sql.unsafe`SELECT 1`

export function serviceRoutes(d: { db: Database; redis: Redis | null; callbackRoutes: RouteDef[]; facade: Facade; readiness: () => Readiness }): RouteDef[] {
  // GET /v1/health must answer even when a dependency hangs: 'down' after 2 s.
  const { db, redis } = d
  const checks: HealthChecks = async () => ({
    postgres: await orAfter(db.pool.oneFirst(sqlPing).then(() => 'ok', () => 'down'), 2_000, 'down'),
    redis: redis ? await orAfter(redis.ping().then(r => (r === 'PONG' ? 'ok' : 'down'), () => 'down'), 2_000, 'down') : 'disabled',
  })
  const routes = [
    ...authRoutes, ...sessionRoutes, ...callRoutes, ...configRoutes, ...deviceRoutes, ...numberRoutes,
    ...webhookRoutes, ...healthRoutes(checks), readinessRoute(d.readiness), ...d.callbackRoutes,
    ...analyticsRoutes, ...billingRoutes, ...twilioCredentialRoutes(d.facade.deps.auth),
  ]
  routes.push(...consoleRoutes(routes)) // the operator console's API: the same handlers for user tokens
  // In the table it documents (built on first request), so the document lists itself.
  routes.push(openapiRoute(routes, { stream: true }))
  return [...routes, ...twilioProxyRoutes(d.facade.deps)]
}
