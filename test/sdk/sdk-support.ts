// What the SDK tests share: clients of a test service (test/support/service.ts) made with the
// SDK itself, a fetch that records every request the SDK sends (the real fetch, observed), and
// the OpenAPI document's operations to match those requests against.
import WebSocket from 'ws'
import { Maskline } from '../../sdk/src/index.js'
import type { WebSocketConstructor } from '../../sdk/src/index.js'
import type { TestService } from '../support/service.js'

export const WS = WebSocket as unknown as WebSocketConstructor

export interface Sent { method: string; path: string; status: number; headers: Record<string, string> }

/** The global fetch, with a record of each request (method, path, answer status, request headers). */
export function recordingFetch(): { fetch: typeof fetch; sent: Sent[] } {
  const sent: Sent[] = []
  const rec: typeof fetch = async (input, init) => {
    const res = await fetch(input, init)
    sent.push({ method: init?.method ?? 'GET', path: new URL(String(input)).pathname, status: res.status, headers: { ...(init?.headers as Record<string, string>) } })
    return res
  }
  return { fetch: rec, sent }
}

export interface Operation { method: string; path: string; operationId: string; auth: string }

/** The HTTP operations of an OpenAPI document, each with a matcher for concrete paths. */
export function operations(doc: any): Array<Operation & { matches(method: string, path: string): boolean }> {
  const out = []
  for (const [path, ops] of Object.entries(doc.paths as Record<string, Record<string, any>>)) {
    const re = new RegExp(`^${path.replace(/\{[^}]+\}/g, '[^/]+')}$`)
    for (const [method, op] of Object.entries(ops)) {
      const M = method.toUpperCase()
      out.push({ method: M, path, operationId: op.operationId as string, auth: op['x-maskline-auth']?.token ?? 'none', matches: (m: string, p: string) => m === M && re.test(p) })
    }
  }
  return out
}

/** Provider callbacks (`/v1/webhooks/cpaas/...`) are the telephony provider's, not a tenant's. */
export const isProviderCallback = (path: string): boolean => path.startsWith('/v1/webhooks/cpaas/')

let n = 0

/** A new tenant signed up through the SDK, a client on its key pair and one on its OWNER's login. */
export async function sdkTenant(api: TestService, opts: { fetch?: typeof fetch } = {}) {
  const f = opts.fetch ? { fetch: opts.fetch } : {}
  const pub = new Maskline({ baseUrl: api.url, ...f })
  const email = `sdk-${++n}-${process.pid}@example.test`
  const password = `pw-${n}-correct-horse-sdk`
  api.secrets.add(password)
  const signed = await pub.auth.signup({ companyName: `SDK ${n} ${process.pid} ${Math.random()}`, email, password })
  api.secrets.add(signed.apiSecret)
  api.secrets.add(signed.accessToken)
  const client = new Maskline({ baseUrl: api.url, apiKey: signed.apiKey, apiSecret: signed.apiSecret, WebSocket: WS, ...f })
  const dashboard = new Maskline({ baseUrl: api.url, email, password, WebSocket: WS, ...f })
  return { pub, client, dashboard, signed, email, password }
}
