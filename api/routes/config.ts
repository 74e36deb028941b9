// Contract 4.4: tenant configuration. Reads accept a tenant or a dashboard token (contract 5.2);
// changes need a dashboard OWNER or ADMIN.
import { Type } from '@sinclair/typebox'
import type { E164, TenantId, TenantRouting } from '../../engine/types.js'
import { getTenant, updateTenant, type TenantPatch, type TenantRow } from '../../sql/tenants.js'
import { route, ApiProblem, type RouteDef } from '../route.js'
import { ConsentMode, E164 as E164Schema, ExpiredCallBehavior, HttpUrl, Nullable, SmsReplyText, TenantView } from '../schemas/common.js'
import type { Services } from '../services.js'
import { checkTenantWebhookUrl } from '../webhook-target.js'

// Unknown fields are ignored: a dashboard may send back the whole tenant object.
const ConfigPatch = Type.Object({
  name: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
  webhookUrl: Type.Optional(Nullable(HttpUrl)),
  defaultGracePeriod: Type.Optional(Type.Integer({ minimum: 0, maximum: 10080 })),
  expiredCallBehavior: Type.Optional(ExpiredCallBehavior),
  supportPhone: Type.Optional(Nullable(E164Schema)),
  recordingEnabled: Type.Optional(Type.Boolean()),
  recordingConsentMode: Type.Optional(ConsentMode),
  recordingConsentAudioUrl: Type.Optional(Nullable(HttpUrl)),
  pushConfig: Type.Optional(Type.Object({}, { additionalProperties: true, maxProperties: 50 })),
  // contract D11: texts sent from a proxy (null: back to the default text).
  smsOptOutText: Type.Optional(Nullable(SmsReplyText)),
  smsHelpText: Type.Optional(Nullable(SmsReplyText)),
})

function routingOf(t: TenantRow): TenantRouting & { smsTexts: { smsOptOutText: string | null; smsHelpText: string | null } } {
  return {
    smsTexts: { smsOptOutText: t.smsOptOutText, smsHelpText: t.smsHelpText },
    id: t.id as TenantId,
    tier: t.tier,
    expiredCallBehavior: t.expiredCallBehavior,
    supportPhone: t.supportPhone as E164 | null,
    recordingConsentAudioUrl: t.recordingConsentAudioUrl,
  }
}

/**
 * After a tenant or its API keys were created or changed through this node: the tenant directory
 * takes the change at once, and the composition root's hook tells the engine and the other nodes.
 */
export async function notifyTenantChanged(services: Services, tenantId: string, row?: TenantRow): Promise<void> {
  services.authenticator.changed(tenantId)
  const t = row ?? await getTenant(services.db, tenantId)
  if (t) await services.onTenantChanged(routingOf(t))
}

async function readTenant(services: Services, tenantId: string): Promise<TenantRow> {
  const t = await getTenant(services.db, tenantId)
  // The token outlived its tenant: the credentials are no longer valid.
  if (!t) throw new ApiProblem('unauthorized', 'The tenant of this token does not exist')
  return t
}

export const configRoutes: RouteDef[] = [
  route({
    method: 'GET', path: '/v1/config', auth: 'any', summary: "The tenant's configuration",
    response: { 200: TenantView }, problems: ['unauthorized', 'forbidden', 'rate-limit'],
    async handler(req) {
      return { status: 200, body: await readTenant(req.services, req.auth!.tenantId) }
    },
  }),
  route({
    method: 'PATCH', path: '/v1/config', auth: 'user', roles: ['OWNER', 'ADMIN'], summary: 'Change the configuration (only sent fields change)',
    body: ConfigPatch, validationSlug: 'validation-error', response: { 200: TenantView },
    problems: ['validation-error', 'unauthorized', 'forbidden', 'conflict', 'rate-limit'],
    async handler(req) {
      const s = req.services
      const patch = req.body as TenantPatch
      // The same check as POST /v1/webhooks: refused now, not at delivery.
      if (typeof patch.webhookUrl === 'string') await checkTenantWebhookUrl(s, patch.webhookUrl, { slug: 'validation-error', field: 'webhookUrl' })
      const r = await updateTenant(s.db, req.auth!.tenantId, patch)
      if (r === 'r-rec') {
        // R-REC: recording may not be enabled with consent disabled.
        throw new ApiProblem('validation-error', 'Recording cannot be enabled with recordingConsentMode NONE', {
          errors: [{ field: 'recordingConsentMode', issue: 'invalid_combination' }],
        })
      }
      if (r === 'conflict') throw new ApiProblem('conflict', 'Another tenant already uses this name')
      if (r === 'not-found') throw new ApiProblem('unauthorized', 'The tenant of this token does not exist')
      await notifyTenantChanged(s, r.id, r)
      return { status: 200, body: r }
    },
  }),
  // Contract 4.4 lists a tenant token; contract 5.2 names tenants/me among the endpoints taking both.
  route({
    method: 'GET', path: '/v1/tenants/me', auth: 'any', summary: 'The tenant of the token',
    response: { 200: Type.Object({ tenant: TenantView }) }, problems: ['unauthorized', 'forbidden', 'rate-limit'],
    async handler(req) {
      return { status: 200, body: { tenant: await readTenant(req.services, req.auth!.tenantId) } }
    },
  }),
]
