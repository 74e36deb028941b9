// Everything a request needs, copied out of uWS synchronously (style 6): `req` is only valid
// until the handler returns, and nothing about the request may be read after the first await.
import type { HttpRequest, HttpResponse } from 'uWebSockets.js'
import type { ClientIpResolver } from './client-ip.js'

export interface Captured {
  method: string
  headers: Record<string, string>
  path: string
  rawQuery: string
  params: Record<string, string>
  /** Only for routes that read it (RouteDef.clientIp): the address costs an ArrayBuffer per request. */
  ip: string | null
  start: number
  aborted: boolean
  /** Set while the body is being read: the client leaving ends the read. */
  abortBody?: () => void
}

/** `clientIp` (TRUSTED_PROXY applied) for the routes that read the address, null for the rest. */
export function capture(res: HttpResponse, req: HttpRequest, paramNames: readonly string[], clientIp: ClientIpResolver | null): Captured {
  const headers: Record<string, string> = {}
  req.forEach((k, v) => { headers[k] = v })
  const params: Record<string, string> = {}
  for (let i = 0; i < paramNames.length; i++) {
    const raw = req.getParameter(i) ?? ''
    params[paramNames[i]!] = raw.includes('%') ? safeDecode(raw) : raw
  }
  return {
    method: req.getMethod().toUpperCase(),
    headers,
    path: req.getUrl(),
    rawQuery: req.getQuery() ?? '',
    params,
    ip: clientIp && clientIp(Buffer.from(res.getRemoteAddressAsText()).toString(), headers['x-forwarded-for']),
    start: performance.now(),
    aborted: false,
  }
}

/** A bad escape, or one decoding to NUL (contract D13), stays as sent: `%00` never reaches a statement. */
function safeDecode(s: string): string {
  try {
    const decoded = decodeURIComponent(s)
    return decoded.indexOf('\0') === -1 ? decoded : s
  } catch {
    return s
  }
}
