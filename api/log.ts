// Logs are redacted by construction (DECISIONS 8): serializers never emit headers or bodies,
// request lines carry the route pattern and never the URL, and errors are logged without their
// message (a driver message can quote a phone number). As a safety net for a field logged by
// mistake, every object is scrubbed before it is written: sensitive keys (and any key ending in
// "phone", the `*Phone` pattern) become "[redacted]" down to four levels.
//
// Why a log formatter and not pino's `redact` paths: fast-redact cannot express `*Phone`, and its
// wildcard paths (`*.password`, `*.*.password` for ~30 keys) cost ~20x a plain log line, which
// every request pays. The scrub below is one pass over the keys and copies only what it changes.
import { pino, type DestinationStream, type Logger, type LoggerOptions } from 'pino'

/** Lower-case key names never logged with their value. */
export const SENSITIVE_KEYS: ReadonlySet<string> = new Set([
  'authorization', 'cookie', 'set-cookie', 'password', 'apikey', 'apisecret', 'secret', 'token', 'accesstoken', 'refreshtoken',
  'phone', 'to', 'from', 'text', 'body', 'rawbody', 'headers', 'query', 'url', 'e164',
])
const REDACTED = '[redacted]'
const MAX_DEPTH = 4

function sensitive(key: string): boolean {
  const k = key.toLowerCase()
  return SENSITIVE_KEYS.has(k) || k.endsWith('phone')
}

/** Copy-on-write scrub: returns the same object when nothing in it is sensitive. Errors are left
 * to the `err`/`error` serializers. */
export function scrub(value: unknown, depth = 0): unknown {
  if (value === null || typeof value !== 'object' || depth >= MAX_DEPTH || value instanceof Error || Buffer.isBuffer(value)) return value
  if (Array.isArray(value)) {
    let out: unknown[] | null = null
    for (let i = 0; i < value.length; i++) {
      const v = scrub(value[i], depth + 1)
      if (v !== value[i]) (out ??= value.slice())[i] = v
    }
    return out ?? value
  }
  const src = value as Record<string, unknown>
  let out: Record<string, unknown> | null = null
  for (const k in src) {
    const v = sensitive(k) ? REDACTED : scrub(src[k], depth + 1)
    if (v !== src[k]) (out ??= { ...src })[k] = v
  }
  return out ?? value
}

/** What an error may say in a log line: its class, code and frames, never its message. */
export function safeError(err: unknown): Record<string, unknown> {
  if (!(err instanceof Error)) return { type: typeof err }
  const e = err as Error & { code?: unknown; constraint?: unknown }
  const out: Record<string, unknown> = { type: e.name }
  if (typeof e.code === 'string' || typeof e.code === 'number') out.code = e.code
  if (typeof e.constraint === 'string') out.constraint = e.constraint
  if (typeof e.stack === 'string') out.stack = e.stack.split('\n').filter(l => /^\s+at /.test(l)).slice(0, 12).join('\n')
  return out
}

export interface LoggerSettings {
  level?: string
  /** Tests pass a stream to capture every line. */
  destination?: DestinationStream
  base?: Record<string, unknown>
}

export function createLogger(opts: LoggerSettings = {}): Logger {
  const options: LoggerOptions = {
    level: opts.level ?? 'info',
    base: opts.base ?? { service: 'maskline' },
    formatters: { log: obj => scrub(obj) as Record<string, unknown> },
    serializers: {
      err: safeError,
      error: safeError,
      req: (r: { method?: unknown; route?: unknown }) => ({ method: r?.method, route: r?.route }),
      res: (r: { statusCode?: unknown; status?: unknown }) => ({ status: r?.statusCode ?? r?.status }),
    },
  }
  return pino(options, opts.destination ?? stdoutDestination())
}

/**
 * Asynchronous, buffered stdout: lines collect up to 8 KiB and go out in one write, at the latest
 * 100 ms after they were logged (the timer), and synchronously at exit (pino's exit hook). One
 * write per access-log line cost more than the routing answer it logs (the callback profile).
 */
function stdoutDestination(): DestinationStream {
  const dest = pino.destination({ dest: 1, sync: false, minLength: 8_192 })
  setInterval(() => { try { dest.flush() } catch { /* a write is in flight; the next tick flushes */ } }, 100).unref()
  return dest
}
