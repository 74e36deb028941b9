// Query strings → object for the query validator. A repeated name becomes an array (Ajv's
// `coerceTypes: 'array'` turns a single value into a one-item array where a schema wants one).
// A malformed escape gives null: the caller answers 400; so does a NUL (contract D13: Postgres
// refuses it in text; decodeURIComponent already refuses escapes that are not UTF-8). `+` stays a plus (RFC 3986, not form
// encoding): `?userPhone=+12025550123` written by hand must reach the validator as E.164.

export function parseQuery(raw: string): Record<string, string | string[]> | null {
  const out: Record<string, string | string[]> = Object.create(null)
  if (!raw) return out
  for (const part of raw.split('&')) {
    if (!part) continue
    const eq = part.indexOf('=')
    const name = decode(eq === -1 ? part : part.slice(0, eq))
    const value = eq === -1 ? '' : decode(part.slice(eq + 1))
    if (name === null || value === null) return null
    if (!name) continue
    const prev = out[name]
    if (prev === undefined) out[name] = value
    else if (Array.isArray(prev)) prev.push(value)
    else out[name] = [prev, value]
  }
  return out
}

function decode(s: string): string | null {
  if (!s.includes('%')) return s.indexOf('\0') === -1 ? s : null
  try {
    const decoded = decodeURIComponent(s)
    return decoded.indexOf('\0') === -1 ? decoded : null
  } catch {
    return null
  }
}
