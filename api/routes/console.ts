// The operator console's API (issue 15): the endpoints the page at /console calls with the
// dashboard user token it logs in with (spec 4.1).
//
// Spec 5.2/5.3 keep the two token types apart: the session, number, webhook and analytics
// endpoints take tenant tokens only, and a user token there is 403. So the console does not call
// them; it calls the same handlers mounted under /v1/console/ with `auth: 'user'`, where a role
// decides what may change (DECISIONS 3): OWNER and ADMIN end, extend and swap sessions and send a
// test webhook, OPERATOR reads. Handlers, schemas (the response allow-lists that keep real numbers
// out) and problems are the originals', so the two surfaces cannot drift; only path, auth and
// roles differ. Three read-only figures that had no endpoint are added here (sql/console.ts).
import { Type } from '@sinclair/typebox'
import { Role, route, type HttpMethod, type RouteDef } from '../route.js'
import { EventEnvelopeSchema } from '../schemas/events.js'
import { SessionIdParams } from '../schemas/session.js'
import { Timestamp } from '../schemas/common.js'
import { activityPerMinute, liveSessionsByState, sessionEvents } from '../../sql/console.js'
import { sessionsOf } from '../services.js'

export const CONSOLE_PREFIX = '/v1/console'
const WRITERS: readonly Role[] = [Role.OWNER, Role.ADMIN]

/** What the console uses of the tenant API, and who may call it there. */
const MIRRORED: ReadonlyArray<{ method: HttpMethod; path: string; roles?: readonly Role[] }> = [
  { method: 'GET', path: '/v1/sessions' },
  { method: 'GET', path: '/v1/sessions/:id' },
  { method: 'GET', path: '/v1/sessions/:id/calls' },
  { method: 'GET', path: '/v1/sessions/:id/sms' },
  { method: 'POST', path: '/v1/sessions/:id/end', roles: WRITERS },
  { method: 'PATCH', path: '/v1/sessions/:id', roles: WRITERS }, // extend the grace period
  { method: 'PATCH', path: '/v1/sessions/:id/target', roles: WRITERS },
  { method: 'GET', path: '/v1/numbers/pool' },
  { method: 'GET', path: '/v1/webhooks' },
  { method: 'GET', path: '/v1/webhooks/logs' },
  // POST /v1/webhooks is not mirrored: it answers the new signing secret, which a page never shows.
  { method: 'POST', path: '/v1/webhooks/test', roles: WRITERS },
]

const ACTIVITY_MINUTES = 60
const EVENTS_MAX = 500

const OverviewView = Type.Object({
  sessions: Type.Object({ PENDING: Type.Integer(), ACTIVE: Type.Integer(), GRACE_PERIOD: Type.Integer() }),
  activity: Type.Object({
    from: Timestamp,
    minutes: Type.Array(Type.Object({ minute: Timestamp, calls: Type.Integer(), sms: Type.Integer() })),
  }),
  timestamp: Timestamp,
})

const ConsoleQuery = Type.Object({
  minutes: Type.Optional(Type.Integer({ minimum: 1, maximum: 1440, default: ACTIVITY_MINUTES })),
})

const READ_PROBLEMS = ['validation', 'unauthorized', 'forbidden', 'rate-limit'] as const

function ownRoutes(): RouteDef[] {
  return [
    route({
      method: 'GET', path: `${CONSOLE_PREFIX}/overview`, auth: 'user',
      summary: 'Console: live sessions by state and calls/SMS per UTC minute (minutes with activity only)',
      query: ConsoleQuery, response: { 200: OverviewView }, problems: READ_PROBLEMS,
      async handler(req) {
        const tenantId = req.auth!.tenantId
        const now = req.services.now()
        const from = Math.floor(now / 60_000) * 60_000 - (((req.query as { minutes?: number }).minutes ?? ACTIVITY_MINUTES) - 1) * 60_000
        const [sessions, minutes] = await Promise.all([
          liveSessionsByState(req.services.db, tenantId),
          activityPerMinute(req.services.db, tenantId, from),
        ])
        return {
          status: 200,
          body: {
            sessions,
            activity: { from: new Date(from).toISOString(), minutes: minutes.map(m => ({ ...m, minute: new Date(m.minute).toISOString() })) },
            timestamp: new Date(now).toISOString(),
          },
        }
      },
    }),
    route({
      method: 'GET', path: `${CONSOLE_PREFIX}/sessions/:id/events`, auth: 'user',
      summary: "Console: a session's events (target swaps included), oldest first",
      params: SessionIdParams, response: { 200: Type.Object({ data: Type.Array(EventEnvelopeSchema) }) },
      problems: ['not-found', ...READ_PROBLEMS],
      async handler(req) {
        const tenantId = req.auth!.tenantId
        const id = (req.params as { id: string }).id
        await sessionsOf(req.services).get(tenantId, id) // 404 unless the tenant has it
        return { status: 200, body: { data: await sessionEvents(req.services.db, tenantId, id, EVENTS_MAX) } }
      },
    }),
  ]
}

/** The console's routes, built from the tenant API's (`api`) so they share handlers and schemas. */
export function consoleRoutes(api: readonly RouteDef[]): RouteDef[] {
  const mirrored = MIRRORED.map(m => {
    const def = api.find(r => r.method === m.method && r.path === m.path)
    if (!def) throw new Error(`console: ${m.method} ${m.path} is not a route`)
    return {
      ...def,
      path: CONSOLE_PREFIX + def.path.slice('/v1'.length),
      auth: 'user',
      ...(m.roles ? { roles: m.roles } : {}),
      summary: `Console (dashboard token${m.roles ? `, ${m.roles.join(' or ')}` : ''}): ${def.summary ?? m.path}`,
    } satisfies RouteDef
  })
  return [...ownRoutes(), ...mirrored]
}
