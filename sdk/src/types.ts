// Request and answer types of the API, read off the generated OpenAPI types (./openapi.ts): an
// endpoint is named by its path and method exactly as the OpenAPI document spells them.
import type { components, paths } from './openapi.js'

export type Path = keyof paths
export type Method = 'get' | 'post' | 'patch' | 'delete'
type Op<P extends Path, M extends Method> = NonNullable<paths[P][M]>

type JsonOf<C> = C extends { content: { 'application/json': infer T } } ? T : void

/** The JSON body an endpoint takes. */
export type Body<P extends Path, M extends Method> = Op<P, M> extends { requestBody?: { content: { 'application/json': infer B } } } ? B : never
/** Its query parameters. */
export type Query<P extends Path, M extends Method> = Op<P, M> extends { parameters: { query?: infer Q } } ? NonNullable<Q> : never
/** What it answers on success (void for an empty body). */
export type Reply<P extends Path, M extends Method> = Op<P, M> extends { responses: infer R }
  ? 200 extends keyof R ? JsonOf<R[200]> : 201 extends keyof R ? JsonOf<R[201]> : 202 extends keyof R ? JsonOf<R[202]> : 204 extends keyof R ? void : unknown
  : never

/** An element of a paginated list's `data`. */
export type Item<P extends Path> = Reply<P, 'get'> extends { data: Array<infer T> } ? T : never

export type EventEnvelope = components['schemas']['EventEnvelope']
export type EventType = EventEnvelope['type']
export type Session = Reply<'/v1/sessions/{id}', 'get'>
export type SessionState = Session['state']
export type CreateSession = Body<'/v1/sessions', 'post'>
export type Call = Reply<'/v1/calls/{id}', 'get'>
export type SessionCall = Item<'/v1/sessions/{id}/calls'>
export type Sms = Item<'/v1/sessions/{id}/sms'>
export type Config = Reply<'/v1/config', 'get'>
export type Tenant = Reply<'/v1/tenants/me', 'get'>
export type Webhook = Reply<'/v1/webhooks', 'post'>
export type WebhookLog = Item<'/v1/webhooks/logs'>
export type DashboardLogin = Reply<'/v1/auth/dashboard/login', 'post'>
export type Role = DashboardLogin['user']['role']
