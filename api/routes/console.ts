// The operator console's API (README.md, Operator console): the endpoints the page at /console calls with the
// dashboard user token it logs in with (contract 4.1).
//
// Contract 5.2/5.3 keep the two token types apart: the session, number, webhook and analytics
// endpoints take tenant tokens only, and a user token there is 403. So the console does not call
// them; it calls the same handlers mounted under /v1/console/ with `auth: 'user'`, where a role
// decides what may change (contract D3): OWNER and ADMIN end, extend and swap sessions and send a
// test webhook, OPERATOR reads. Handlers, schemas (the response allow-lists that keep real numbers
// out) and problems are the originals', so the two surfaces cannot drift; only path, auth and
// roles differ. Three read-only figures that had no endpoint are added here (sql/console.ts).
import { Type } from '@sinclair/typebox'
import { ApiProblem, Role, route, type HttpMethod, type RouteDef } from '../route.js'
import { SessionIdParams } from '../schemas/session.js'
import { Nullable, StringEnum, Timestamp, Uuid } from '../schemas/common.js'
import { activityPerMinute, liveSessionsByState, sessionTimeline } from '../../sql/console.js'

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
/** Of each of calls, SMS and swaps, the newest this many (the calls and SMS lists' maximum page). */
const TIMELINE_PER_KIND = 200

const OverviewView = Type.Object({
  sessions: Type.Object({ PENDING: Type.Integer(), ACTIVE: Type.Integer(), GRACE_PERIOD: Type.Integer() }),
  activity: Type.Object({
    from: Timestamp,
    minutes: Type.Array(Type.Object({ minute: Timestamp, calls: Type.Integer(), sms: Type.Integer() })),
  }),
  timestamp: Timestamp,
})

const Direction = StringEnum(['A_TO_B', 'B_TO_A'])
/** A session's timeline: what the console's session page draws, parties by role only. */
const TimelineView = Type.Object({
  data: Type.Array(Type.Union([
    Type.Object({
      kind: StringEnum(['created', 'activated', 'swap', 'ended', 'expired', 'failed'], {
        description: 'swap: party B was swapped (PATCH /v1/sessions/:id/target), the proxy kept; failed: the session ended in FAILED',
      }),
      at: Timestamp,
    }),
    Type.Object({
      kind: Type.Literal('call'), at: Type.String({ format: 'date-time', description: 'initiatedAt' }), id: Uuid, direction: Direction,
      status: StringEnum(['RINGING', 'ANSWERED', 'COMPLETED', 'MISSED', 'FAILED']), durationSeconds: Type.Integer({ minimum: 0 }),
    }),
    Type.Object({
      kind: Type.Literal('sms'), at: Type.String({ format: 'date-time', description: 'sentAt' }), id: Uuid, direction: Direction,
      status: StringEnum(['QUEUED', 'SENT', 'DELIVERED', 'FAILED']),
      reason: Nullable(Type.String({ description: 'as SMS records: opted_out or channel for a message dropped before the provider' })),
    }),
  ]), { description: 'Oldest first' }),
  truncated: Type.Boolean({ description: `true when the session has more than ${TIMELINE_PER_KIND} calls, SMS or swaps: only the newest ${TIMELINE_PER_KIND} of each are listed` }),
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
      method: 'GET', path: `${CONSOLE_PREFIX}/sessions/:id/timeline`, auth: 'user',
      summary: "Console: a session's timeline, oldest first: created, activated, calls (status, duration), SMS (status), party B swaps, end, expiry",
      params: SessionIdParams, response: { 200: TimelineView }, problems: ['not-found', ...READ_PROBLEMS],
      async handler(req) {
        const tenantId = req.auth!.tenantId
        const id = (req.params as { id: string }).id
        const timeline = await sessionTimeline(req.services.db, tenantId, id, TIMELINE_PER_KIND)
        if (!timeline) throw new ApiProblem('not-found') // another tenant's session too
        return { status: 200, body: { data: timeline.items, truncated: timeline.truncated } }
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
