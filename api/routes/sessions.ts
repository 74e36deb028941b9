// Contract 4.2: sessions. Commands go through the session runner (engine + one transaction); a live
// session is read from memory (contract D4), lists and ended sessions from Postgres.
import { hash } from 'node:crypto'
import { Type } from '@sinclair/typebox'
import { route, ApiProblem, type RouteDef } from '../route.js'
import { Envelope } from '../schemas/common.js'
import {
  CreateSessionBody, ListSessionsQuery, PatchSessionBody, SessionIdParams, SessionView, SwapTargetBody,
  VerifyQuery, VerifyResult,
} from '../schemas/session.js'
import { CallView, CallWithConsentView, RecordListQuery, SmsView } from '../schemas/records.js'
import * as sessions from '../../sql/sessions.js'
import * as records from '../../sql/records.js'
import type { Services } from '../services.js'

const IDEMPOTENCY_KEY_MAX = 255

function tenantId(req: { auth: { tenantId: string } | null }): string {
  return req.auth!.tenantId
}

export const sessionRoutes: RouteDef[] = [
  route({
    method: 'POST', path: '/v1/sessions', auth: 'tenant', summary: 'Create a masking session',
    body: CreateSessionBody, response: { 201: SessionView },
    problems: ['validation', 'unauthorized', 'forbidden', 'rate-limit', 'tier-session-limit', 'pool-exhausted', 'conflict'],
    async handler(req) {
      const key = req.headers['idempotency-key']
      if (key !== undefined && (key.length === 0 || key.length > IDEMPOTENCY_KEY_MAX)) {
        throw new ApiProblem('validation', `Idempotency-Key must be 1-${IDEMPOTENCY_KEY_MAX} characters`, {
          errors: [{ field: 'Idempotency-Key', issue: 'invalid_length' }],
        })
      }
      const idem = key ? { key, requestHash: hash('sha256', JSON.stringify(req.body), 'hex') } : undefined
      const res = await req.services.sessions.create(tenantId(req), req.body, idem)
      return { status: res.status, body: res.body, ...(res.replayed ? { headers: { 'idempotent-replayed': 'true' } } : {}) }
    },
  }),
  route({
    method: 'GET', path: '/v1/sessions', auth: 'tenant', summary: 'List sessions, newest first',
    query: ListSessionsQuery, response: { 200: Envelope(SessionView) },
    problems: ['validation', 'unauthorized', 'forbidden', 'rate-limit'],
    async handler(req) {
      const q = req.query as { state?: string; limit?: number; after?: string }
      const page = await sessions.listSessions(req.services.db, { tenantId: tenantId(req), state: q.state, limit: q.limit ?? 20, after: q.after })
      return pageReply(page)
    },
  }),
  // Registered before /v1/sessions/:id so "verify" is not taken for an id.
  route({
    method: 'GET', path: '/v1/sessions/verify', auth: 'tenant', summary: 'Does this user have an active session?',
    query: VerifyQuery, response: { 200: VerifyResult },
    problems: ['validation', 'unauthorized', 'forbidden', 'rate-limit'],
    async handler(req) {
      const found = await req.services.sessions.verify(tenantId(req), (req.query as { userPhone: string }).userPhone)
      return { status: 200, body: found ? { verified: true, ...found } : { verified: false } }
    },
  }),
  route({
    method: 'GET', path: '/v1/sessions/:id', auth: 'tenant', summary: 'Get a session',
    params: SessionIdParams, response: { 200: SessionView },
    problems: ['not-found', 'unauthorized', 'forbidden', 'rate-limit'],
    handler(req) {
      const v = req.services.sessions.get(tenantId(req), (req.params as { id: string }).id)
      return v instanceof Promise ? v.then(body => ({ status: 200, body })) : { status: 200, body: v }
    },
  }),
  route({
    method: 'PATCH', path: '/v1/sessions/:id', auth: 'tenant', summary: 'Merge metadata, change the grace period',
    params: SessionIdParams, body: PatchSessionBody, response: { 200: SessionView },
    problems: ['validation', 'not-found', 'unauthorized', 'forbidden', 'rate-limit'],
    async handler(req) {
      return { status: 200, body: await req.services.sessions.patch(tenantId(req), (req.params as { id: string }).id, req.body) }
    },
  }),
  route({
    method: 'PATCH', path: '/v1/sessions/:id/target', auth: 'tenant', summary: 'Replace party B, keep the proxy',
    params: SessionIdParams, body: SwapTargetBody, response: { 200: SessionView },
    problems: ['validation', 'not-found', 'target-conflict', 'invalid-target', 'unauthorized', 'forbidden', 'rate-limit'],
    async handler(req) {
      return { status: 200, body: await req.services.sessions.swapTarget(tenantId(req), (req.params as { id: string }).id, (req.body as { customerPhone: string }).customerPhone) }
    },
  }),
  route({
    method: 'POST', path: '/v1/sessions/:id/end', auth: 'tenant', summary: 'End a session (enter the grace period)',
    params: SessionIdParams, response: { 200: SessionView },
    problems: ['session-end-failed', 'not-found', 'unauthorized', 'forbidden', 'rate-limit'],
    async handler(req) {
      return { status: 200, body: await req.services.sessions.end(tenantId(req), (req.params as { id: string }).id) }
    },
  }),
  route({
    method: 'GET', path: '/v1/sessions/:id/calls', auth: 'tenant', summary: "A session's calls",
    params: SessionIdParams, query: RecordListQuery, response: { 200: Envelope(CallWithConsentView) },
    problems: ['validation', 'not-found', 'unauthorized', 'forbidden', 'rate-limit'],
    async handler(req) {
      const id = (req.params as { id: string }).id
      await requireSession(req.services, tenantId(req), id)
      const q = req.query as { limit?: number; after?: string }
      const page = await records.listSessionCalls(req.services.db, { sessionId: id, limit: q.limit ?? 50, after: q.after })
      return pageReply(page)
    },
  }),
  route({
    method: 'GET', path: '/v1/sessions/:id/sms', auth: 'tenant', summary: "A session's SMS records (metadata only), newest first",
    params: SessionIdParams, query: RecordListQuery, response: { 200: Envelope(SmsView) },
    problems: ['validation', 'not-found', 'unauthorized', 'forbidden', 'rate-limit'],
    async handler(req) {
      const id = (req.params as { id: string }).id
      await requireSession(req.services, tenantId(req), id)
      const q = req.query as { limit?: number; after?: string }
      const page = await records.listSessionSms(req.services.db, { sessionId: id, limit: q.limit ?? 50, after: q.after })
      return pageReply(page)
    },
  }),
]

export const callRoutes: RouteDef[] = [
  route({
    method: 'GET', path: '/v1/calls', auth: 'tenant', summary: "The tenant's calls",
    query: Type.Intersect([RecordListQuery, Type.Object({
      status: Type.Optional(Type.Union(['RINGING', 'ANSWERED', 'COMPLETED', 'MISSED', 'FAILED'].map(s => Type.Literal(s)))),
      direction: Type.Optional(Type.Union([Type.Literal('A_TO_B'), Type.Literal('B_TO_A')])),
      periodStart: Type.Optional(Type.String({ format: 'date-time' })),
      periodEnd: Type.Optional(Type.String({ format: 'date-time' })),
      sessionId: Type.Optional(Type.String({ maxLength: 64 })),
    })]),
    response: { 200: Envelope(CallView) },
    problems: ['validation', 'unauthorized', 'forbidden', 'rate-limit'],
    async handler(req) {
      const q = req.query as { limit?: number; after?: string; status?: string; direction?: string; periodStart?: string; periodEnd?: string; sessionId?: string }
      const page = await records.listCalls(req.services.db, { tenantId: tenantId(req), ...q, limit: q.limit ?? 50 })
      return pageReply(page)
    },
  }),
  route({
    method: 'GET', path: '/v1/calls/:id', auth: 'tenant', summary: 'One call record',
    params: Type.Object({ id: Type.String({ minLength: 1, maxLength: 64 }) }), response: { 200: CallView },
    problems: ['not-found', 'unauthorized', 'forbidden', 'rate-limit'],
    async handler(req) {
      const call = await records.getCall(req.services.db, tenantId(req), (req.params as { id: string }).id)
      if (!call) throw new ApiProblem('not-found')
      return { status: 200, body: call }
    },
  }),
]

/** Contract 2.10: the envelope of a page; a cursor the store cannot read is a validation error. */
function pageReply<T>(page: 'bad-cursor' | { data: T[]; after: string | null }) {
  if (page === 'bad-cursor') throw new ApiProblem('validation', 'after is not a valid cursor', { errors: [{ field: 'after', issue: 'invalid_cursor' }] })
  return { status: 200, body: { data: page.data, pagination: { count: page.data.length, after: page.after } } }
}

/** 404 unless the tenant has this session (live ones are known from memory). */
async function requireSession(services: Services, tenant: string, id: string) {
  await services.sessions.get(tenant, id)
}
