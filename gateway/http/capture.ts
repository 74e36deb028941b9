// Everything a request needs, copied out of uWS synchronously (STYLE 6): `req` is only valid
// until the handler returns, and nothing about the request may be read after the first await.
import type { HttpRequest, HttpResponse } from 'uWebSockets.js'

export interface Captured {
  method: string
  headers: Record<string, string>
  path: string
  rawQuery: string
  params: Record<string, string>
  ip: string
  start: number
  aborted: boolean
  /** Set while the body is being read: the client leaving ends the read. */
  abortBody?: () => void
}

export function capture(res: HttpResponse, req: HttpRequest, paramNames: readonly string[]): Captured {
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
    ip: clientIp(res, headers),
    start: performance.now(),
    aborted: false,
  }
}

/** A bad escape, or one decoding to NUL (issue 19), stays as sent: `%00` never reaches a statement. */
function safeDecode(s: string): string {
  try {
    const decoded = decodeURIComponent(s)
    return decoded.indexOf('\0') === -1 ? decoded : s
  } catch {
    return s
  }
}

const LOOPBACK = /^(127\.|::1$|::ffff:127\.|0000:0000:0000:0000:0000:0000:0000:0001$|0000:0000:0000:0000:0000:ffff:7f)/

/**
 * The peer address, or, when the peer is the TLS terminator on loopback (DECISIONS 1), the
 * address it appended to X-Forwarded-For (the rightmost entry: earlier ones are client-supplied).
 */
function clientIp(res: HttpResponse, headers: Record<string, string>): string {
  const peer = Buffer.from(res.getRemoteAddressAsText()).toString()
  if (!LOOPBACK.test(peer)) return peer
  const xff = headers['x-forwarded-for']
  if (xff) {
    const last = xff.slice(xff.lastIndexOf(',') + 1).trim()
    if (last) return last
  }
  return peer
}
