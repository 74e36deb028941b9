// The façade driven the way a user drives Twilio Proxy: the official `twilio` SDK with its Proxy
// domain pointed at the test service (client.proxy.baseUrl), credentials issued by maskline.
import twilio from 'twilio'
import { sql } from 'slonik'
import { startTestService, type TestService } from '../support/service.js'

export type Client = ReturnType<typeof twilio>

export interface FacadeAccount { accountSid: string; authToken: string; client: Client; tenantId: string; ownerToken: string }

/** A new tenant, its façade credentials (POST /v1/twilio-proxy/credentials) and an SDK client. */
export async function facadeAccount(api: TestService, opts: { tier?: 'GROWTH' | 'ENTERPRISE' } = {}): Promise<FacadeAccount> {
  const acct = await api.signup()
  if (opts.tier) {
    await api.svc.db.pool.query(sql.unsafe`UPDATE tenants SET tier = ${opts.tier} WHERE id = ${acct.tenantId}`)
    api.svc.services.authenticator.changed(acct.tenantId)
  }
  const r = await api.req('POST', '/v1/twilio-proxy/credentials', { token: acct.ownerToken })
  if (r.status !== 201) throw new Error(`credentials: ${r.status} ${r.text}`)
  api.secrets.add(r.body.authToken)
  return { accountSid: r.body.accountSid, authToken: r.body.authToken, client: clientFor(api, r.body.accountSid, r.body.authToken), tenantId: acct.tenantId, ownerToken: acct.ownerToken }
}

export function clientFor(api: TestService, sid: string, token: string): Client {
  const client = twilio(sid, token)
  client.proxy.baseUrl = `${api.url}/proxy`
  return client
}

/** A test service with a clock the test moves (TTL expiry without waiting). */
export async function startFacade(t: Parameters<typeof startTestService>[0], opts: { env?: Record<string, string> } = {}) {
  let offset = 0
  const now = () => Date.now() + offset
  const api = await startTestService(t, { now, ...(opts.env ? { env: opts.env } : {}) })
  return { api, advance: (ms: number) => { offset += ms } }
}

/** Pool numbers of the default NUMBER_POOL (US:+12025550100-+12025550199). */
export const poolNumber = (i: number) => `+120255501${String(i).padStart(2, '0')}`

/** Awaits a promise that must reject with the SDK's RestException; returns it. */
export async function restError(p: Promise<unknown>): Promise<{ status: number; code: number; message: string; moreInfo: string; name?: string; constructor: { name: string } }> {
  try {
    await p
  } catch (err) {
    return err as never
  }
  throw new Error('expected the SDK call to fail')
}
