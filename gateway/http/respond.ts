// Writing a response. Everything happens inside `res.cork` (style 6): one syscall for status,
// headers and body, and required by uWS for any write made after the handler returned.
import type { HttpResponse } from 'uWebSockets.js'

const STATUS_TEXT: Record<number, string> = {
  200: 'OK', 201: 'Created', 202: 'Accepted', 204: 'No Content',
  400: 'Bad Request', 401: 'Unauthorized', 403: 'Forbidden', 404: 'Not Found', 405: 'Method Not Allowed',
  409: 'Conflict', 413: 'Payload Too Large', 415: 'Unsupported Media Type', 422: 'Unprocessable Entity',
  429: 'Too Many Requests', 500: 'Internal Server Error', 501: 'Not Implemented', 503: 'Service Unavailable',
}
const lines = new Map<number, string>()

export function statusLine(status: number): string {
  let l = lines.get(status)
  if (!l) lines.set(status, (l = STATUS_TEXT[status] ? `${status} ${STATUS_TEXT[status]}` : String(status)))
  return l
}

export interface Outgoing {
  status: number
  contentType: string | null
  body: string | Buffer | null
  /** Written in order; later sets may repeat a name (they should not). */
  headers: (Record<string, string> | undefined)[]
  /** Close the connection after the response (413: the rest of the body is not read). */
  close?: boolean
  /** The problem's `instance`, for the log line. */
  instance?: string
}

/** A header value that could end its line (CR, LF) or end the header block (NUL): never written. */
const UNSAFE_VALUE = /[\r\n\0]/

/**
 * Every header of a response in one native call: `writeHeader(name, value)` writes
 * `name: value\r\n`, so the first header's value carries the rest of the block (a session read
 * wrote six headers in six calls; one block measured +1.4 % req/s on bare uWS: bench/RESULTS.md,
 * "What moved the figures", 1be893a). Values are ours (numbers, ids, constants), and any that could break the
 * block is dropped here rather than sent: uWS itself writes a value as given.
 */
function headerBlock(out: Outgoing): [string, string] | null {
  let name: string | null = null
  let block = ''
  if (out.contentType && out.body !== null) {
    name = 'content-type'
    block = out.contentType
  }
  for (const h of out.headers) {
    if (!h) continue
    for (const k in h) {
      const v = h[k]!
      if (UNSAFE_VALUE.test(v) || UNSAFE_VALUE.test(k)) continue
      if (name === null) {
        name = k
        block = v
      } else block += `\r\n${k}: ${v}`
    }
  }
  return name === null ? null : [name, block]
}

export function send(res: HttpResponse, out: Outgoing): void {
  const headers = headerBlock(out)
  res.cork(() => {
    res.writeStatus(statusLine(out.status))
    if (headers) res.writeHeader(headers[0], headers[1])
    // No body and no Content-Length (RFC 9110 8.6). endWithoutBody(undefined) wrote a bogus
    // length (2^63) and left the connection unusable for the next request.
    if (out.status === 204 || out.status === 304) {
      if (out.close) res.endWithoutBody(0, true)
      else res.endWithoutBody()
    } else res.end(out.body ?? '', out.close)
  })
}
