// The maskline side of the façade's credentials: the tenant's OWNER issues (or rotates) the
// Twilio-shaped account SID and auth token with a dashboard token; the token is shown once.
import { isoTime } from '../../sql/vocabulary/iso-time.js'
import { accountOfTenant, insertApiKey, revokeApiKey, upsertAccount } from '../../sql/twilio-proxy.js'
import { ApiProblem, Role, route, type RouteDef } from '../route.js'
import { TwilioApiKeyIssued, TwilioApiKeyParams, TwilioCredentialsIssued, TwilioCredentialsView } from '../schemas/twilio-proxy.js'
import type { ProxyAuthenticator } from './auth.js'
import { newAccountSid, newApiKeySid, newAuthToken, tokenCipher, tokenMac } from './credentials.js'
import { PROXY_PREFIX } from './router.js'

export function twilioCredentialRoutes(auth: ProxyAuthenticator): RouteDef[] {
  return [
    route({
      method: 'POST', path: '/v1/twilio-proxy/credentials', auth: 'user', roles: [Role.OWNER],
      summary: 'Issue or rotate the Twilio Proxy façade credentials (the auth token is shown once)',
      response: { 201: TwilioCredentialsIssued }, problems: ['unauthorized', 'forbidden', 'rate-limit'],
      async handler(req) {
        const s = req.services
        const tenantId = req.auth!.tenantId
        const now = s.now()
        const token = newAuthToken()
        const existing = await accountOfTenant(s.db, tenantId)
        const sid = await upsertAccount(s.db, {
          sid: existing?.sid ?? newAccountSid(), tenantId, tokenMac: tokenMac(s.phoneKey, token), tokenEnc: tokenCipher(s.phoneKey).encrypt(token),
        }, now)
        auth.rotated(sid)
        return { status: 201, body: { accountSid: sid, authToken: token, rotatedAt: isoTime(now), baseUrl: `${s.config.publicBaseUrl}${PROXY_PREFIX}` } }
      },
    }),
    route({
      method: 'GET', path: '/v1/twilio-proxy/credentials', auth: 'user', roles: [Role.OWNER],
      summary: 'The Twilio Proxy façade account SID (null before one is issued)',
      response: { 200: TwilioCredentialsView }, problems: ['unauthorized', 'forbidden', 'rate-limit'],
      async handler(req) {
        const a = await accountOfTenant(req.services.db, req.auth!.tenantId)
        return { status: 200, body: { accountSid: a?.sid ?? null, baseUrl: `${req.services.config.publicBaseUrl}${PROXY_PREFIX}` } }
      },
    }),
    route({
      method: 'POST', path: '/v1/twilio-proxy/api-keys', auth: 'user', roles: [Role.OWNER],
      summary: 'Issue a Twilio Proxy façade API key (SK…; the secret is shown once); the account credentials must exist',
      response: { 201: TwilioApiKeyIssued }, problems: ['unauthorized', 'forbidden', 'rate-limit', 'conflict'],
      async handler(req) {
        const s = req.services
        const account = await accountOfTenant(s.db, req.auth!.tenantId)
        if (!account) throw new ApiProblem('conflict', 'Issue the account credentials first (POST /v1/twilio-proxy/credentials)')
        const sid = newApiKeySid()
        const secret = newAuthToken()
        await insertApiKey(s.db, { sid, tenantId: account.tenantId, secretMac: tokenMac(s.phoneKey, secret) }, s.now())
        return { status: 201, body: { sid, secret, accountSid: account.sid } }
      },
    }),
    route({
      method: 'DELETE', path: '/v1/twilio-proxy/api-keys/:sid', auth: 'user', roles: [Role.OWNER],
      summary: 'Revoke a Twilio Proxy façade API key (at once on this node, within a minute on the others)',
      params: TwilioApiKeyParams, response: { 204: null }, problems: ['validation', 'unauthorized', 'forbidden', 'rate-limit', 'not-found'],
      async handler(req) {
        const sid = (req.params as { sid: string }).sid
        if (!await revokeApiKey(req.services.db, req.auth!.tenantId, sid, req.services.now())) throw new ApiProblem('not-found', 'No such API key')
        auth.rotated(sid)
        return { status: 204 }
      },
    }),
  ]
}
