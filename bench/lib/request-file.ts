// Pre-generated raw HTTP requests for the load generator. Signatures (HMAC-SHA1 over URL + sorted
// form, Ed25519 over `ts|body`) are computed here, in Node, before the run; wrk only replays the
// bytes (bench/wrk/replay.lua), so signing costs nothing on the load side.
//
// File format: records of `<byte length>\n<raw request>`, back to back.
import { closeSync, openSync, readFileSync, writeSync } from 'node:fs'

export interface RawRequest {
  method: string
  /** Path and query, e.g. `/v1/webhooks/cpaas/voice`. */
  path: string
  headers: Record<string, string>
  body?: string
}

export function encodeRequest(r: RawRequest, host: string): Buffer {
  const body = r.body === undefined ? undefined : Buffer.from(r.body)
  let head = `${r.method} ${r.path} HTTP/1.1\r\nhost: ${host}\r\n`
  for (const [k, v] of Object.entries(r.headers)) head += `${k}: ${v}\r\n`
  if (body) head += `content-length: ${body.length}\r\n`
  head += '\r\n'
  return body ? Buffer.concat([Buffer.from(head, 'latin1'), body]) : Buffer.from(head, 'latin1')
}

/** Writes `count` requests made by `make(k)`; returns how many bytes were written. */
export function writeRequestFile(path: string, host: string, count: number, make: (k: number) => RawRequest): number {
  const fd = openSync(path, 'w')
  let bytes = 0
  const parts: Buffer[] = []
  let pending = 0
  const flush = () => {
    if (!parts.length) return
    const b = Buffer.concat(parts)
    writeSync(fd, b)
    bytes += b.length
    parts.length = 0
    pending = 0
  }
  try {
    for (let k = 0; k < count; k++) {
      const raw = encodeRequest(make(k), host)
      parts.push(Buffer.from(`${raw.length}\n`, 'latin1'), raw)
      pending += raw.length
      if (pending > 1 << 20) flush()
    }
    flush()
  } finally {
    closeSync(fd)
  }
  return bytes
}

/** Parses a request file back (the autocannon fallback and the pre-flight check use it). */
export function readRequestFile(path: string, max = Infinity): RawRequest[] {
  const data = readFileSync(path)
  const out: RawRequest[] = []
  let pos = 0
  while (pos < data.length && out.length < max) {
    const nl = data.indexOf(10, pos)
    const len = Number(data.subarray(pos, nl).toString('latin1'))
    const raw = data.subarray(nl + 1, nl + 1 + len)
    pos = nl + 1 + len
    const headEnd = raw.indexOf('\r\n\r\n')
    const head = raw.subarray(0, headEnd).toString('latin1').split('\r\n')
    const [method, path] = head[0]!.split(' ')
    const headers: Record<string, string> = {}
    for (const line of head.slice(1)) {
      const c = line.indexOf(':')
      const k = line.slice(0, c).toLowerCase()
      if (k !== 'host' && k !== 'content-length') headers[k] = line.slice(c + 1).trim()
    }
    const body = raw.subarray(headEnd + 4)
    out.push({ method: method!, path: path!, headers, ...(body.length ? { body: body.toString('utf8') } : {}) })
  }
  return out
}
