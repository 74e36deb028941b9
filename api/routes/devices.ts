// Contract 4.7 + contract D9: push tokens and presence, keyed by tenant and the hashed userPhone.
// Tenant or dashboard token; validation failures use the `validation-error` slug.
import { Type } from '@sinclair/typebox'
import { deactivateDeviceToken, getPresence, upsertDeviceToken, upsertPresence } from '../../sql/devices.js'
import { route, ApiProblem, type ApiRequest, type RouteDef } from '../route.js'
import { E164, Nullable, Platform, StringEnum } from '../schemas/common.js'

const PushToken = Type.String({ minLength: 1, maxLength: 4096 })
const PresenceStatus = StringEnum(['online', 'background', 'offline'])
const PROBLEMS = ['validation-error', 'unauthorized', 'forbidden', 'rate-limit'] as const

const RegisterBody = Type.Object({ userPhone: E164, token: PushToken, platform: Platform, appBundleId: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })) })
const UnregisterBody = Type.Object({ token: PushToken })
const PresenceBody = Type.Object({ userPhone: E164, status: PresenceStatus, platform: Platform })
const PresenceQuery = Type.Object({ userPhone: E164 })
const PresenceView = Type.Object({ status: PresenceStatus, platform: Nullable(Platform), ts: Nullable(Type.Integer()) })

/** The party hash of a number under the tenant's salt (contract D2): the number is not stored. */
async function userHash(req: ApiRequest, e164: string): Promise<{ tenantId: string; hash: string }> {
  const tenantId = req.auth!.tenantId
  const meta = await req.services.authenticator.tenant(tenantId)
  if (!meta) throw new ApiProblem('unauthorized', 'The tenant of this token does not exist')
  return { tenantId, hash: req.services.hashParty(meta.salt, e164) }
}

export const deviceRoutes: RouteDef[] = [
  route({
    method: 'POST', path: '/v1/devices/token', auth: 'any', summary: 'Register a push token (upsert keyed on the token)',
    body: RegisterBody, validationSlug: 'validation-error', response: { 204: null }, problems: [...PROBLEMS],
    async handler(req) {
      const { tenantId, hash } = await userHash(req, req.body.userPhone)
      await upsertDeviceToken(req.services.db, { tenantId, userHash: hash, token: req.body.token, platform: req.body.platform, appBundleId: req.body.appBundleId ?? null })
      return { status: 204 }
    },
  }),
  route({
    method: 'DELETE', path: '/v1/devices/token', auth: 'any', summary: 'Deactivate a push token (token in the body)',
    body: UnregisterBody, validationSlug: 'validation-error', response: { 204: null }, problems: [...PROBLEMS],
    async handler(req) {
      await deactivateDeviceToken(req.services.db, req.auth!.tenantId, req.body.token)
      return { status: 204 }
    },
  }),
  route({
    method: 'POST', path: '/v1/devices/presence', auth: 'any', summary: 'Report device presence',
    body: PresenceBody, validationSlug: 'validation-error', response: { 204: null }, problems: [...PROBLEMS],
    async handler(req) {
      const { tenantId, hash } = await userHash(req, req.body.userPhone)
      await upsertPresence(req.services.db, { tenantId, userHash: hash, status: req.body.status, platform: req.body.platform, ts: req.services.now() })
      return { status: 204 }
    },
  }),
  route({
    method: 'GET', path: '/v1/devices/presence', auth: 'any', summary: 'Latest reported presence (offline when nothing was reported)',
    query: PresenceQuery, validationSlug: 'validation-error', response: { 200: PresenceView }, problems: [...PROBLEMS],
    async handler(req) {
      const { tenantId, hash } = await userHash(req, req.query.userPhone)
      const p = await getPresence(req.services.db, tenantId, hash)
      return { status: 200, body: p ?? { status: 'offline', platform: null, ts: null } }
    },
  }),
]
