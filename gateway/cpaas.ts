// The telephony providers of one deployment, composed from the configuration: the outbound SMS
// router (each number's provider, with failover: api/cpaas/provider-router.ts), the signature check
// of each provider's callbacks, and each provider's callback routes in its own dialect
// (/v1/webhooks/cpaas: Telnyx or the sandbox; /v1/webhooks/twilio: Twilio).
//
// A provider's SDK is loaded only when it is configured: importing one costs a good part of a
// second of every boot (bench/RESULTS.md, "What moved the figures", 18465a9).
import type { Logger } from 'pino'
import type { Config } from './config.js'
import type { RouteDef } from '../api/route.js'
import { createCallbackHandlers, type CallbackDeps } from '../api/cpaas/callbacks/handlers.js'
import { cpaasRoutes } from '../api/cpaas/callbacks/routes.js'
import type { Dialect } from '../api/cpaas/dialect.js'
import { ProviderRouter } from '../api/cpaas/provider-router.js'
import type { SmsProvider } from '../api/cpaas/provider.js'
import { SandboxProvider } from '../api/cpaas/sandbox-provider.js'
import { createSignatureVerifier, type SignedRequest, type VerifyResult } from '../api/cpaas/signature.js'

export interface Cpaas {
  provider: ProviderRouter
  /** The pipeline's check of a signed route: Twilio's callbacks with its Auth Token, the others as CPAAS_SIGNATURE says. */
  verifyCallback(req: SignedRequest): VerifyResult
  /** The callback routes of every configured provider, bound to the handlers' dependencies. */
  routes(deps: Omit<CallbackDeps, 'provider' | 'sandbox'>): RouteDef[]
}

export async function startCpaas(cfg: Config, o: { log: Logger; now: () => number; publicBaseUrl: () => string; numberProvider: (n: string) => string | undefined }): Promise<Cpaas> {
  const kinds: Record<string, SmsProvider[]> = {}
  // The sandbox carries nothing: no real provider is built beside it (NUMBER_POOL names none then).
  const real = cfg.provider !== 'sandbox'
  if (!real) kinds['sandbox'] = [new SandboxProvider('sandbox', o.log)]
  if (real && cfg.telnyx.apiKey) {
    const { TelnyxProvider } = await import('../api/cpaas/telnyx/provider.js')
    const profile = cfg.telnyx.messagingProfileId ? { messagingProfileId: cfg.telnyx.messagingProfileId } : {}
    kinds['telnyx'] = [new TelnyxProvider({ name: 'telnyx', apiKey: cfg.telnyx.apiKey, ...(cfg.telnyx.baseUrl ? { baseURL: cfg.telnyx.baseUrl } : {}), ...profile })]
    if (cfg.telnyx.backupApiKey) {
      kinds['telnyx'].push(new TelnyxProvider({ name: 'telnyx-backup', apiKey: cfg.telnyx.backupApiKey, ...(cfg.telnyx.backupBaseUrl ? { baseURL: cfg.telnyx.backupBaseUrl } : {}), ...profile }))
    }
  }
  let twilioVerify: ((req: SignedRequest) => VerifyResult) | null = null
  let twilioDialect: Dialect | null = null
  if (real && cfg.twilio) {
    const [{ TwilioProvider }, { createTwilioVerifier }, { TWILIO_DIALECT }] = await Promise.all([
      import('../api/cpaas/twilio/provider.js'), import('../api/cpaas/twilio/signature.js'), import('../api/cpaas/twilio/twiml.js'),
    ])
    const { accountSid, authToken, apiKey, apiSecret, baseUrl } = cfg.twilio
    kinds['twilio'] = [new TwilioProvider({
      accountSid, authToken, ...(apiKey ? { apiKey, apiSecret } : {}), ...(baseUrl ? { baseUrl } : {}),
      statusCallbackUrl: () => o.publicBaseUrl() + TWILIO_DIALECT.prefix + '/sms',
    })]
    const verifier = createTwilioVerifier({ authToken, publicBaseUrl: o.publicBaseUrl })
    twilioVerify = req => verifier.verify(req)
    twilioDialect = TWILIO_DIALECT
  }
  const provider = new ProviderRouter({ kinds, defaultKind: cfg.provider, numberProvider: o.numberProvider, breaker: { now: o.now } })
  const verifier = createSignatureVerifier({
    mode: cfg.signature, publicBaseUrl: o.publicBaseUrl, now: o.now,
    ...(cfg.telnyx.publicKey ? { telnyxPublicKey: cfg.telnyx.publicKey } : {}),
    ...(cfg.hmacSecret ? { hmacSecret: cfg.hmacSecret } : {}),
  })
  const twilioPrefix = twilioDialect ? twilioDialect.prefix + '/' : null
  return {
    provider,
    verifyCallback: req => twilioVerify && twilioPrefix && req.path.startsWith(twilioPrefix) ? twilioVerify(req) : verifier.verify(req),
    routes(deps) {
      const full: CallbackDeps = { ...deps, provider, sandbox: cfg.provider === 'sandbox' }
      const routes = cpaasRoutes(createCallbackHandlers(full))
      if (twilioDialect) routes.push(...cpaasRoutes(createCallbackHandlers(full, twilioDialect), twilioDialect))
      return routes
    },
  }
}
