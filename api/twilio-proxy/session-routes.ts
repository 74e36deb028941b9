// Sessions (KC, docs/twilio-proxy.md): create (with Participants), list, fetch (SID or UniqueName),
// update (Ttl, DateExpiry, Status closed / in-progress to re-open), delete.
import { uuidv7 } from '../../sql/vocabulary/ids.js'
import {
  deleteSession, getSession, listSessions, patchSession, sessionParticipants, type SessionMode, type SessionRow,
} from '../../sql/twilio-proxy-sessions.js'
import type { ServiceRow } from '../../sql/twilio-proxy.js'
import type { Ctx } from './context.js'
import { invalidParam, notFound, rule, TwilioError } from './errors.js'
import { closeDue, endNative, expiryOf, isOpen, MAX_DURATION_MINUTES } from './lifecycle.js'
import { sql } from 'slonik'
import { refreshActivity } from '../../sql/twilio-proxy-interactions.js'
import { listBody, pageRequest } from './paging.js'
import { identifierOf, openNativeFor, participantsParam } from './participants.js'
import { createSession } from './session-create.js'
import { sessionJson } from './serialize.js'
import { serviceOf } from './service-routes.js'
import { uuidOf } from './sid.js'
import type { Table } from './router.js'

const MODES: readonly SessionMode[] = ['message-only', 'voice-only', 'voice-and-message']
const STATUSES = ['open', 'in-progress', 'closed', 'failed', 'unknown'] as const
const MAX_TTL = 2_147_483_646

/** The Service and its session (`byName`: a UniqueName too, 80308 when none has it). */
export async function sessionOf(c: Ctx, byName = false): Promise<{ service: ServiceRow; session: SessionRow }> {
  const service = await serviceOf(c, c.segs[1]!)
  await closeDue(c)
  const ref = c.segs[3]!
  const id = uuidOf('KC', ref)
  if (id) {
    await refreshActivity(c.services.db, sql.fragment`id = ${id}`, MAX_DURATION_MINUTES, c.now)
    const session = await getSession(c.services.db, service.id, { id })
    if (!session) throw notFound(c.path)
    return { service, session }
  }
  if (!byName) throw notFound(c.path)
  await refreshActivity(c.services.db, sql.fragment`service_id = ${service.id} AND unique_name = ${ref}`, MAX_DURATION_MINUTES, c.now)
  const session = await getSession(c.services.db, service.id, { uniqueName: ref })
  if (!session) throw rule(80308, 'Session with the unique name not found', 404)
  return { service, session }
}

const closedError = () => rule(80607, 'Session is closed and cannot be updated')

export const sessionRoutes: Table = [
  ['Services/*/Sessions', {
    async POST(c) {
      const p = c.params
      const service = await serviceOf(c, c.segs[1]!)
      await closeDue(c)
      const uniqueName = p.str('UniqueName', 191)
      if (uniqueName === '') throw invalidParam('UniqueName')
      const dateExpiry = p.date('DateExpiry') ?? null
      if (dateExpiry !== null && dateExpiry <= c.now) throw invalidParam('DateExpiry')
      const ttl = p.int('Ttl', 0, MAX_TTL) ?? service.default_ttl
      const mode = p.oneOf('Mode', MODES) ?? 'voice-and-message'
      const status = p.oneOf('Status', STATUSES) ?? 'open'
      if (status !== 'open' && status !== 'in-progress') throw rule(80608, `A session cannot be created ${status}`)
      const participants = participantsParam(p.all('Participants'))
      if (participants.length > 2) throw rule(80609, 'A session has at most 2 participants')
      const base = { ttl, date_expiry: dateExpiry, date_started: c.now, date_last_interaction: null }
      const row = await createSession(c, service, {
        id: uuidv7(c.now), service_id: service.id, tenant_id: c.auth.tenantId, unique_name: uniqueName ?? null, status, mode,
        ...base, expires_at: expiryOf(base, c.now), created_at: c.now,
      }, participants)
      return { status: 201, body: sessionJson(c.base, c.auth.accountSid, row) }
    },
    async GET(c) {
      const service = await serviceOf(c, c.segs[1]!)
      await closeDue(c)
      await refreshActivity(c.services.db, sql.fragment`service_id = ${service.id}`, MAX_DURATION_MINUTES, c.now)
      const req = pageRequest(c.params)
      const page = await listSessions(c.services.db, service.id, req)
      return { status: 200, body: listBody('sessions', c.base, `/Services/${c.segs[1]}/Sessions`, { ...req, tokenText: c.params.str('PageToken') }, page, page.rows.map(r => sessionJson(c.base, c.auth.accountSid, r))) }
    },
  }],
  ['Services/*/Sessions/*', {
    async GET(c) {
      const { session } = await sessionOf(c, true)
      return { status: 200, body: sessionJson(c.base, c.auth.accountSid, session) }
    },
    async POST(c) {
      const { session } = await sessionOf(c)
      const p = c.params
      const ttl = p.int('Ttl', 0, MAX_TTL)
      const dateExpiry = p.date('DateExpiry')
      const status = p.oneOf('Status', STATUSES)
      if (dateExpiry !== undefined && dateExpiry <= c.now) throw invalidParam('DateExpiry')
      const out = isOpen(session) ? await updateOpen(c, session, ttl, dateExpiry, status) : await updateClosed(c, session, ttl, dateExpiry, status)
      return { status: 200, body: sessionJson(c.base, c.auth.accountSid, out) }
    },
    async DELETE(c) {
      const { session } = await sessionOf(c)
      await dropSession(c, session.id, session)
      return { status: 204 }
    },
  }],
]

async function dropSession(c: Ctx, id: string, row?: SessionRow): Promise<void> {
  if (row?.native_session_id && isOpen(row)) await endNative(c, row.native_session_id)
  await deleteSession(c.services.db, id)
}

async function updateOpen(c: Ctx, s: SessionRow, ttl?: number, dateExpiry?: number, status?: string): Promise<SessionRow> {
  if (status !== undefined && status !== s.status && status !== 'closed') throw rule(80608, `A session cannot go from ${s.status} to ${status}`)
  if (status === 'closed') {
    if (s.native_session_id) await endNative(c, s.native_session_id)
    return ok(await patchSession(c.services.db, s.id, { status: 'closed', date_ended: c.now, closed_reason: 'api', expires_at: null, native_session_id: null }, c.now))
  }
  const next = { ttl: ttl ?? s.ttl, date_expiry: dateExpiry ?? s.date_expiry, date_started: s.date_started, date_last_interaction: s.date_last_interaction }
  return ok(await patchSession(c.services.db, s.id, { ttl: next.ttl, date_expiry: next.date_expiry, expires_at: expiryOf(next, c.now) }, c.now))
}

/** Only a re-open (Status in-progress, or open) changes a closed session: 80607 otherwise. */
async function updateClosed(c: Ctx, s: SessionRow, ttl?: number, dateExpiry?: number, status?: string): Promise<SessionRow> {
  if (status === undefined || status === 'closed') throw closedError()
  if (status !== 'in-progress' && status !== 'open') throw rule(80608, `A session cannot go from ${s.status} to ${status}`)
  if (s.status !== 'closed') throw closedError()
  // A re-open restarts the clock (date_started and the Ttl count from now); an expired DateExpiry is dropped.
  const expiry = dateExpiry ?? (s.date_expiry !== null && s.date_expiry > c.now ? s.date_expiry : null)
  const next = { ttl: ttl ?? s.ttl, date_expiry: expiry, date_started: c.now, date_last_interaction: null }
  const row = await patchSession(c.services.db, s.id, {
    status: 'in-progress', date_ended: null, closed_reason: null, ttl: next.ttl, date_expiry: expiry, date_started: c.now, expires_at: expiryOf(next, c.now),
  }, c.now)
  if (row === 'pair-taken') throw rule(80604, 'A participant of this session is active on its proxy number in another session')
  const live = (await sessionParticipants(c.services.db, s.id)).filter(p => p.date_deleted === null)
  if (live.length === 2) {
    try {
      await openNativeFor(c, row, live[0]!, live[1]!, identifierOf(c, live[1]!))
    } catch (err) {
      await patchSession(c.services.db, s.id, { status: 'closed', date_ended: s.date_ended, closed_reason: s.closed_reason, expires_at: null }, c.now)
      throw err
    }
  }
  return row
}

function ok(r: SessionRow | 'pair-taken'): SessionRow {
  if (r === 'pair-taken') throw new TwilioError(409, 80623, 'Conflict; retry')
  return r
}
