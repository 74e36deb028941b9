// Logs are redacted by construction (contract D8): serializers never emit headers or bodies,
// request lines carry the route pattern and never the URL, and errors are logged without their
// message (a driver message can quote a phone number). As a safety net for a field logged by
// mistake, every object is scrubbed before it is written: sensitive keys (and any key ending in
// "phone", the `*Phone` pattern) become "[redacted]" down to four levels.
//
// Why a log formatter and not pino's `redact` paths: fast-redact cannot express `*Phone`, and its
// wildcard paths (`*.password`, `*.*.password` for ~30 keys) cost ~20x a plain log line, which
// every request pays. The scrub below is one pass over the keys and copies only what it changes.
import { write as fsWrite, writeSync } from 'node:fs'
import { pino, type DestinationStream, type Logger, type LoggerOptions } from 'pino'

/** Lower-case key names never logged with their value. */
const SENSITIVE_KEYS: ReadonlySet<string> = new Set([
  'authorization', 'cookie', 'set-cookie', 'password', 'apikey', 'apisecret', 'secret', 'token', 'accesstoken', 'refreshtoken', 'authtoken', 'hmacsecret',
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
function safeError(err: unknown): Record<string, unknown> {
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
 * Asynchronous, buffered stdout: lines are appended to an array with a running length
 * and go out joined in one write once 64 KiB are pending, or at the latest 100 ms after they were
 * logged (8 KiB writes cost a session read ~1 µs more of service CPU: bench/RESULTS.md, "Access
 * log: the cost of a line"). A line costs an array push: pino.destination (sonic-boom) measured the byte length of its
 * whole pending buffer on every write, which cost ~2.7 µs a line (bench/access-log.bench.ts).
 * One process-wide instance, shared by every logger of the process.
 */
function stdoutDestination(): DestinationStream {
  if (!stdout) {
    stdout = createAppendDestination({ fd: 1, minLength: 64 * 1024 })
    // pino's exit behaviour: what is pending is written synchronously when the process exits,
    // and a fatal line is flushed at once (pino calls flushSync after `fatal`).
    process.on('exit', () => stdout?.flushSync())
  }
  return stdout
}
let stdout: AppendDestination | null = null

/** Resolves once every line logged so far is written (the graceful stop, before process.exit). */
export function flushStdout(timeoutMs = 1_000): Promise<void> {
  return stdout ? stdout.drain(timeoutMs) : Promise.resolve()
}

export interface AppendDestination extends DestinationStream {
  write(line: string): void
  /** Writes everything pending now, blocking (exit, fatal). */
  flushSync(): void
  /** Starts an asynchronous write of what is pending, unless one is in flight. */
  flush(): void
  /** Resolves once nothing is pending (or after `timeoutMs`). */
  drain(timeoutMs: number): Promise<void>
  /** Lines dropped since start because the output could not keep up (the cap). */
  readonly dropped: number
  /** Characters waiting, in flight included. */
  readonly pending: number
}

export interface AppendOptions {
  fd: number
  /** Pending characters that start a write (default 8 KiB). */
  minLength?: number
  /** The longest a line waits (default 100 ms). */
  intervalMs?: number
  /** Past this many pending characters a line is dropped and counted (default 16 MiB). */
  maxPending?: number
  /** The write call (tests slow it down); fs.write by default. */
  writeFn?: (fd: number, buf: Buffer, cb: (err: NodeJS.ErrnoException | null, written: number) => void) => void
}

/**
 * Never blocks the event loop: writes run on libuv's pool, one at a time. Bounded: when the output
 * does not keep up (a stalled pipe) and `maxPending` characters wait, new lines are dropped and
 * counted; once a write completes, one line says how many were lost.
 */
export function createAppendDestination(o: AppendOptions): AppendDestination {
  const minLength = o.minLength ?? 8_192
  const maxPending = o.maxPending ?? 16 * 2 ** 20
  const writeFn = o.writeFn ?? ((fd, buf, cb) => fsWrite(fd, buf, 0, buf.length, null, cb))
  let parts: string[] = []
  let queued = 0 // characters in `parts`
  let inFlight: Buffer | null = null // the write under way (what remains of it)
  let dropped = 0
  let reported = 0
  let retryTimer: NodeJS.Timeout | null = null

  const report = (): void => {
    if (dropped === reported) return
    const n = dropped - reported
    reported = dropped
    const line = `{"level":40,"time":${Date.now()},"service":"maskline","code":"log-dropped","dropped":${n},"msg":"log lines dropped: the output did not keep up"}\n`
    parts.push(line)
    queued += line.length
  }
  const onWritten = (err: NodeJS.ErrnoException | null, written: number): void => {
    const buf = inFlight!
    if (err) {
      if (err.code === 'EAGAIN') { // a non-blocking pipe that is full: try again shortly
        retryTimer = setTimeout(() => { retryTimer = null; writeFn(o.fd, buf, onWritten) }, 10)
        return
      }
      inFlight = null // EPIPE and the like: these lines are lost; logging never throws
      return
    }
    if (written < buf.length) {
      inFlight = buf.subarray(written)
      writeFn(o.fd, inFlight, onWritten)
      return
    }
    inFlight = null
    report()
    if (queued >= minLength) flush()
  }
  function flush(): void {
    if (inFlight || queued === 0) return
    inFlight = Buffer.from(parts.length === 1 ? parts[0]! : parts.join(''))
    parts = []
    queued = 0
    writeFn(o.fd, inFlight, onWritten)
  }
  function flushSync(): void {
    if (retryTimer) { clearTimeout(retryTimer); retryTimer = null }
    report()
    let buf = Buffer.concat([inFlight ?? Buffer.alloc(0), Buffer.from(parts.join(''))])
    // An asynchronous write in flight may have completed without its callback having run (the
    // event loop is gone at exit): its lines may then appear twice, never be lost. The graceful
    // stop awaits drain() first, so this is only for the exits that cannot wait.
    inFlight = null
    parts = []
    queued = 0
    for (let tries = 0; buf.length > 0 && tries < 1_000;) {
      try {
        buf = buf.subarray(writeSync(o.fd, buf))
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EAGAIN') return
        tries++
      }
    }
  }
  const timer = setInterval(flush, o.intervalMs ?? 100)
  timer.unref()
  return {
    write(line: string) {
      if (queued > maxPending) { dropped++; return }
      parts.push(line)
      queued += line.length
      if (queued >= minLength) flush()
    },
    flush,
    flushSync,
    async drain(timeoutMs: number) {
      const until = performance.now() + timeoutMs
      while ((queued > 0 || inFlight) && performance.now() < until) {
        flush()
        await new Promise(resolve => setTimeout(resolve, 1))
      }
    },
    get dropped() { return dropped },
    get pending() { return queued + (inFlight?.length ?? 0) },
  }
}

/** One access line's fields (gateway/http/app.ts): what `log.info({...}, 'request')` would carry. */
export type AccessLine = (method: string, route: string | null, status: number, us: number, tenantId: string | undefined, instance: string | undefined, aborted: boolean) => void

/**
 * The access line at info level, as the logger would write it and byte for byte the same (its
 * level, time, bindings, then method, route, status, us, tenantId, instance, aborted, msg), but
 * composed here, without pino's per-line work (object serialization, the scrub formatter, which has
 * nothing to scrub in these keys): 0.62 µs a line against 1.06 through pino (bench/access-log.bench.ts),
 * on every request. A logger that is not a plain pino logger (mixins, hooks, a
 * custom level format) gets its own `info` call.
 */
export function accessLineWriter(logger: Logger): AccessLine {
  const l = logger as unknown as Record<symbol, unknown>
  const sym = pino.symbols
  const stream = l[sym.streamSym] as { write(s: string): void } | undefined
  const chindings = l[sym.chindingsSym]
  const time = l[sym.timeSym]
  const info = logger.levels.values.info
  const hooks = l[sym.hooksSym] as { logMethod?: unknown; streamWrite?: unknown } | undefined
  const levelFormat = (l[sym.formattersSym] as { level?: (label: string, n: number) => unknown } | undefined)?.level
  const plain = stream !== undefined && typeof chindings === 'string' && typeof time === 'function' && info !== undefined &&
    !l[sym.mixinSym] && !hooks?.logMethod && !hooks?.streamWrite && l[sym.messageKeySym] === 'msg' &&
    levelFormat !== undefined && JSON.stringify(levelFormat('info', info)) === `{"level":${info}}`
  if (!plain) {
    return (method, route, status, us, tenantId, instance, aborted) => {
      const line: Record<string, unknown> = { method, route, status, us }
      if (tenantId !== undefined) line.tenantId = tenantId
      if (instance !== undefined) line.instance = instance
      if (aborted) line.aborted = true
      logger.info(line, 'request')
    }
  }
  const now = time as () => string
  const level = info!
  return (method, route, status, us, tenantId, instance, aborted) => {
    if (logger.levelVal > level) return
    let s = `{"level":${level}${now()}${chindings},"method":${JSON.stringify(method)},"route":${route === null ? 'null' : JSON.stringify(route)},"status":${status},"us":${us}`
    if (tenantId !== undefined) s += `,"tenantId":${JSON.stringify(tenantId)}`
    if (instance !== undefined) s += `,"instance":${JSON.stringify(instance)}`
    if (aborted) s += ',"aborted":true'
    stream.write(`${s},"msg":"request"}\n`)
  }
}
