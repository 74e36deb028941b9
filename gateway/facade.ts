// The Twilio Proxy v1 façade's parts (docs/twilio-proxy.md): its credentials and REST API, the
// intercept and out-of-session callbacks that sit around the native call and SMS callbacks, and
// the sweep that expires façade sessions (their native sessions carry no timers of their own).
import type { Logger } from 'pino'
import type { Services } from '../api/services.js'
import type { FacadeDeps } from '../api/twilio-proxy/context.js'
import { createProxyAuthenticator } from '../api/twilio-proxy/auth.js'
import { enginePinnedSessions } from '../api/twilio-proxy/native.js'
import { expireDue } from '../api/twilio-proxy/lifecycle.js'
import type { createSessionRunner } from '../api/app/session-runner.js'
import type { ProviderRouter } from '../api/cpaas/provider-router.js'
import type { Config } from './config.js'
import { facadeIntercept, facadeOutOfSession, type OutOfSession } from './webhooks/twilio-callbacks.js'
import type { ShutdownStack } from './shutdown.js'

export interface Facade {
  /** What the façade's routes need (api/twilio-proxy/router.ts). */
  deps: FacadeDeps
  intercept: ReturnType<typeof facadeIntercept>
  outOfSession: OutOfSession
  /** Expires the façade sessions past their TTL now (the service runs it every second). */
  expireDue(): Promise<number>
  /** Boot: the Services' intercept and out-of-session callback URLs. */
  load(): Promise<void>
}

export function buildFacade(d: {
  cfg: Config; log: Logger; now: () => number; services: Services; runner: ReturnType<typeof createSessionRunner>
  provider: Pick<ProviderRouter, 'sendSms'>; shutdown: ShutdownStack
}): Facade {
  const { cfg, log } = d
  const intercept = facadeIntercept({ pool: d.services.db, phoneKey: cfg.phoneKey, allowInsecure: cfg.webhookAllowInsecure, timeoutMs: cfg.interceptTimeoutMs, log })
  d.shutdown.defer(() => intercept.close())
  const reload = async (sessionsOf?: string) => {
    if (sessionsOf === undefined) await Promise.all([intercept.reload(), outOfSession.reload()])
    else if (intercept.covers(sessionsOf)) await intercept.reload()
  }
  const deps: FacadeDeps = {
    auth: createProxyAuthenticator(d.now),
    native: enginePinnedSessions({ ...d.services.sessions, expireDue: () => d.runner.expireDue() }),
    configuredBaseUrl: () => cfg.publicBaseUrl,
    changed: reload,
    sendSms: async (from, to, text) => (await d.provider.sendSms({ from, to, text })).providerMessageId,
  }
  // It creates sessions as the façade does.
  const outOfSession = facadeOutOfSession({ services: d.services, deps, allowInsecure: cfg.webhookAllowInsecure, timeoutMs: cfg.interceptTimeoutMs, log })
  d.shutdown.defer(() => outOfSession.close())
  return { deps, intercept, outOfSession, expireDue: () => expireDue(d.services.db, deps.native, d.now()), load: () => reload() }
}
