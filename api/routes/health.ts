// Contract 4.11: health, no authentication and no rate limit.
import { Type } from '@sinclair/typebox'
import { route, type RouteDef } from '../route.js'
import { Nullable, StringEnum, Timestamp } from '../schemas/common.js'

const HealthView = Type.Object({
  status: StringEnum(['healthy', 'degraded']),
  checks: Type.Object({ postgres: Type.String(), redis: Type.String() }),
  timestamp: Timestamp,
})

const CpaasView = Type.Object({
  providers: Type.Array(Type.Object({
    name: Type.String(),
    state: StringEnum(['CLOSED', 'OPEN', 'HALF_OPEN']),
    openedAt: Nullable(Timestamp),
    lastError: Nullable(Type.String()),
  })),
  timestamp: Timestamp,
})

/** The dependency probes of GET /v1/health: 'ok', 'down', or 'disabled' (not configured). */
export type HealthChecks = () => Promise<{ postgres: string; redis: string }>

const iso = (t: number | string | null): string | null => (t === null ? null : typeof t === 'number' ? new Date(t).toISOString() : t)

/**
 * `checks`: the probes, from the composition root (gateway/routes.ts: a Postgres ping, and Redis
 * when configured, each 'down' after 2 s); a required argument, so there is no fallback to drift from.
 */
export function healthRoutes(checks: HealthChecks): RouteDef[] {
  return [
    route({
      method: 'GET', path: '/v1/health', auth: 'none', summary: 'Liveness and dependencies (503 when one is down)',
      response: { 200: HealthView, 503: HealthView }, problems: [],
      async handler(req) {
        const s = req.services
        const probed = await checks()
        // 'disabled' = not configured (embedded mode): not a failure.
        const healthy = Object.values(probed).every(v => v === 'ok' || v === 'disabled')
        return { status: healthy ? 200 : 503, body: { status: healthy ? 'healthy' : 'degraded', checks: probed, timestamp: new Date(s.now()).toISOString() } }
      },
    }),
    route({
      method: 'GET', path: '/v1/health/cpaas', auth: 'none', summary: 'Telephony provider circuit breakers',
      response: { 200: CpaasView }, problems: [],
      handler(req) {
        const providers = req.services.cpaasHealth().map(p => ({ ...p, openedAt: iso(p.openedAt) }))
        return { status: 200, body: { providers, timestamp: new Date(req.services.now()).toISOString() } }
      },
    }),
  ]
}

const ReadyView = Type.Object({
  status: StringEnum(['ready', 'booting', 'draining']),
  timestamp: Timestamp,
})

export type Readiness = 'ready' | 'booting' | 'draining'

/**
 * docs/operations.md: readiness, apart from liveness (`/v1/health`). 503 until the boot has finished (the
 * engine holds every live session before anything listens; the first expiry sweep and the webhook
 * dispatcher still run after), and 503 from the moment SIGTERM starts the drain.
 */
export function readinessRoute(state: () => Readiness): RouteDef {
  return route({
    method: 'GET', path: '/v1/health/ready', auth: 'none', summary: 'Readiness: 200 when taking traffic, 503 while booting or draining',
    response: { 200: ReadyView, 503: ReadyView }, problems: [],
    handler(req) {
      const status = state()
      return { status: status === 'ready' ? 200 : 503, body: { status, timestamp: new Date(req.services.now()).toISOString() } }
    },
  })
}
