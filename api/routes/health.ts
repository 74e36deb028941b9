// Spec 4.11: health, no authentication and no rate limit.
import { Type } from '@sinclair/typebox'
import { sql } from 'slonik'
import { route, type RouteDef } from '../route.js'
import { Nullable, StringEnum, Timestamp } from '../schemas/common.js'
import type { Services } from '../services.js'

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

const PROBE_TIMEOUT_MS = 2_000

async function defaultChecks(s: Services): Promise<{ postgres: string; redis: string }> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<string>(resolve => { timer = setTimeout(() => resolve('timeout'), PROBE_TIMEOUT_MS) })
  const ping = s.db.oneFirst(sql.unsafe`SELECT 1`).then(() => 'ok', () => 'error')
  const postgres = await Promise.race([ping, timeout])
  clearTimeout(timer)
  return { postgres, redis: 'disabled' }
}

const iso = (t: number | string | null): string | null => (t === null ? null : typeof t === 'number' ? new Date(t).toISOString() : t)

export const healthRoutes: RouteDef[] = [
  route({
    method: 'GET', path: '/v1/health', auth: 'none', summary: 'Liveness and dependencies (503 when one is down)',
    response: { 200: HealthView, 503: HealthView }, problems: [],
    async handler(req) {
      const s = req.services
      const checks = await (s.checks ? s.checks() : defaultChecks(s))
      // 'disabled' = not configured (embedded mode): not a failure.
      const healthy = Object.values(checks).every(v => v === 'ok' || v === 'disabled')
      return { status: healthy ? 200 : 503, body: { status: healthy ? 'healthy' : 'degraded', checks, timestamp: new Date(s.now()).toISOString() } }
    },
  }),
  route({
    method: 'GET', path: '/v1/health/cpaas', auth: 'none', summary: 'Telephony provider circuit breakers',
    response: { 200: CpaasView }, problems: [],
    handler(req) {
      const providers = (req.services.cpaasHealth?.() ?? []).map(p => ({ ...p, openedAt: iso(p.openedAt) }))
      return { status: 200, body: { providers, timestamp: new Date(req.services.now()).toISOString() } }
    },
  }),
]

const ReadyView = Type.Object({
  status: StringEnum(['ready', 'booting', 'draining']),
  timestamp: Timestamp,
})

export type Readiness = 'ready' | 'booting' | 'draining'

/**
 * Issue 15: readiness, apart from liveness (`/v1/health`). 503 until the boot has finished (the
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
