// The whole service in a CHILD process, started exactly as `npm start` does (`node --import tsx
// gateway/main.ts`, configured only through its environment), so a test can SIGKILL it mid-load
// and start it again on the same data. The port is read from its first JSON log line with
// `"msg":"listening"` (PORT=0).
//
//   const data = await childData(t)            // a fresh database (real PG) or DATA_DIR (embedded)
//   const svc = await startChild(t, data)      // { url, pid, kill(signal), exited, ... }
//   svc.kill('SIGKILL'); await svc.exited
//   const again = await startChild(t, data)    // same database / DATA_DIR, same secrets
//
// Backends (read the way test/support/db.ts reads them):
// - TEST_DATABASE_URL set: a plain fresh database next to it (CREATE DATABASE; the service
//   migrates it at boot), dropped in teardown. JWT_SECRET and PHONE_KEY are generated once per
//   childData() and passed to every child started on it (several nodes share them).
// - unset: embedded PGlite in a temp DATA_DIR, seeded from the migrated PGlite dump that
//   test/support/db.ts caches in the temp directory (initdb in WASM takes ~30 s on a small
//   machine). The service generates its secrets into DATA_DIR/secrets on first start and reuses
//   them on every restart; phoneKey() reads them back so a test can compute party hashes.
//
// Every child is SIGKILLed by its own pid at teardown (and on exit of the test process) if it is
// still running.
import { spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as delay } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { createPool, sql, type DatabasePool } from 'slonik'
import { busStreamName } from '../../gateway/bus.js'
import { EnvSchema } from '../../gateway/config.js'
import { openDatabase, type Database } from '../../sql/db.js'
import { migrate } from '../../sql/migrate.js'
import { embeddedTemplate } from './db.js'

interface Teardown {
  teardown(fn: () => unknown): void
}

/** tap's Test: when the test is failing at teardown, the child's last warnings are printed. */
interface TapLike extends Teardown {
  passing?(): boolean
  comment?(...args: unknown[]): void
}

const MAIN = fileURLToPath(new URL('../../gateway/main.ts', import.meta.url))
const REPO = fileURLToPath(new URL('../../', import.meta.url))
const CONFIG_VARS = new Set(Object.keys(EnvSchema.properties))

export function testDatabaseUrl(): string | null {
  return process.env.TEST_DATABASE_URL || null
}

function withDatabase(url: string, name: string): string {
  const u = new URL(url)
  u.pathname = `/${name}`
  return u.toString()
}

/** Where the children of one test keep their data, across restarts. */
export interface ChildData {
  kind: 'postgres' | 'embedded'
  /** DATA_DIR of every child (embedded: holds PGlite and the generated secrets). */
  dataDir: string
  /** The fresh database (real PG only). */
  databaseUrl: string | null
  /** What every child started on this data gets: DATA_DIR or DATABASE_URL (+ secrets). */
  env: Record<string, string>
  /** PHONE_KEY in force (embedded: what the first child generated; call after it started). */
  phoneKey(): Buffer
  /**
   * A pool on the data from the test process. Embedded: opens PGlite on DATA_DIR, which only one
   * process may hold, so no child may run meanwhile; close it before starting one. Real PG: any time.
   */
  open(opts?: { maximumPoolSize?: number }): Promise<Database>
}

/**
 * The bus stream of the nodes on `data` (named per database, gateway/bus.ts), once a child has
 * booted on it. Real PG only while a child runs (see `open`).
 */
export async function busStream(data: ChildData): Promise<string> {
  const db = await data.open({ maximumPoolSize: 1 })
  try {
    return busStreamName(await db.pool.oneFirst(sql.unsafe`SELECT id::text FROM instance`) as string)
  } finally {
    await db.close()
  }
}

export async function childData(t: Teardown, opts: { databaseUrl?: string | null } = {}): Promise<ChildData> {
  const dataDir = mkdtempSync(join(tmpdir(), 'maskline-child-'))
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
  const base = opts.databaseUrl === undefined ? testDatabaseUrl() : opts.databaseUrl
  if (!base) {
    // Seed DATA_DIR with the migrated template: the child finds PG_VERSION and skips initdb.
    const seed = await embeddedTemplate()
    const db = await openDatabase({ dataDir, embeddedSeed: seed })
    await migrate(db.pool)
    await db.close()
    return {
      kind: 'embedded',
      dataDir,
      databaseUrl: null,
      env: { DATA_DIR: dataDir },
      phoneKey: () => Buffer.from(readFileSync(join(dataDir, 'secrets', 'phone-key'), 'utf8').trim(), 'base64'),
      open: o => openDatabase({ dataDir, ...(o?.maximumPoolSize ? { maximumPoolSize: o.maximumPoolSize } : {}) }),
    }
  }
  const name = `maskline_child_${randomBytes(6).toString('hex')}`
  const admin = await createPool(base, { maximumPoolSize: 1, captureStackTrace: false, idleTimeout: 1_000 })
  try {
    await admin.query(sql.unsafe`CREATE DATABASE ${sql.identifier([name])}`)
  } finally {
    await admin.end()
  }
  t.teardown(async () => {
    // A fresh admin pool: the server may have been restarted meanwhile.
    for (let attempt = 0; ; attempt++) {
      try {
        const a = await createPool(base, { maximumPoolSize: 1, captureStackTrace: false, idleTimeout: 1_000 })
        try {
          await a.query(sql.unsafe`DROP DATABASE IF EXISTS ${sql.identifier([name])} WITH (FORCE)`)
        } finally {
          await a.end()
        }
        return
      } catch (err) {
        if (attempt >= 10) throw err
        await delay(500)
      }
    }
  })
  const url = withDatabase(base, name)
  const phoneKey = randomBytes(32)
  return {
    kind: 'postgres',
    dataDir,
    databaseUrl: url,
    env: { DATA_DIR: dataDir, DATABASE_URL: url, JWT_SECRET: randomBytes(48).toString('base64url'), PHONE_KEY: phoneKey.toString('base64') },
    phoneKey: () => phoneKey,
    open: o => openDatabase({ databaseUrl: url, dataDir, ...(o?.maximumPoolSize ? { maximumPoolSize: o.maximumPoolSize } : {}) }),
  }
}

export interface ChildExit { code: number | null; signal: NodeJS.Signals | null }

export interface ChildService {
  url: string
  port: number
  pid: number
  /** Figures of the "listening" line: startService's own boot time and the live sessions it rebuilt. */
  boot: { ms: number; liveSessions: number }
  /** Wall-clock time (Date.now) the listening line was read, and the child was spawned. */
  listeningAt: number
  spawnedAt: number
  /** Every stdout line so far (pino JSON). */
  lines: string[]
  /** The tail of stderr. */
  stderr(): string
  kill(signal?: NodeJS.Signals): void
  /** SIGTERM, then SIGKILL after graceMs; resolves on exit. */
  stop(graceMs?: number): Promise<ChildExit>
  exited: Promise<ChildExit>
  /** Resolves with the first stdout line (from the start) `match` accepts. */
  waitForLine<T>(match: (o: Record<string, unknown>, line: string) => T | undefined, timeoutMs: number, what: string): Promise<T>
}

const running = new Set<ChildProcess>()
let exitHook = false

function killLeftovers() {
  for (const c of running) {
    if (c.pid && c.exitCode === null && c.signalCode === null) {
      try { process.kill(c.pid, 'SIGKILL') } catch { /* gone */ }
    }
  }
}

export interface StartChildOptions {
  /** More environment (NUMBER_POOL, REDIS_URL, ...). REDIS_URL defaults to TEST_REDIS_URL. */
  env?: Record<string, string>
  /** How long to wait for the listening line (default 120 s). */
  timeoutMs?: number
}

/**
 * For every child run with `--import tsx`: no V8 coverage from it. tap's processinfo hooks spawn and
 * has children record coverage, but tsx compiles a file into another script than the test process's
 * ts-node does (engine/engine.ts: 14.8 KB on 3 lines against 46 KB on 280), and tap's report merges
 * both under one URL: counts land on the wrong ranges, and in one full run the merge dropped most
 * files from the embedded suite's report (76.6 %, 2,618 of 16,428 statements). What the children
 * run is the code the test processes run in-process, where it is measured.
 */
export const NO_CHILD_COVERAGE = { _TAPJS_PROCESSINFO_COVERAGE_: '0' } as const

export async function startChild(t: TapLike, data: ChildData, opts: StartChildOptions = {}): Promise<ChildService> {
  if (!exitHook) {
    exitHook = true
    process.on('exit', killLeftovers)
  }
  const env: NodeJS.ProcessEnv = {}
  // Only what the test decides configures the child; tap's coverage loader is not passed on.
  for (const [k, v] of Object.entries(process.env)) {
    if (CONFIG_VARS.has(k) || k === 'NODE_OPTIONS' || k === 'NODE_V8_COVERAGE' || k.startsWith('TAP') || k.startsWith('_TAP')) continue
    env[k] = v
  }
  const redisUrl = process.env.TEST_REDIS_URL || undefined
  Object.assign(env, {
    ...NO_CHILD_COVERAGE,
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'info',
    WEBHOOK_ALLOW_INSECURE: 'true',
    // Tests sign tenants up together on a busy 2-core machine: they queue for a hash as they always
    // did. The 2 s bound is for floods, and test/api/hash-queue.test.ts judges it.
    SIGNUP_MAX_WAIT_MS: '60000',
    ...(redisUrl && data.kind === 'postgres' ? { REDIS_URL: redisUrl } : {}),
    ...data.env,
    ...opts.env,
  })
  const spawnedAt = Date.now()
  const proc = spawn(process.execPath, ['--import', 'tsx', MAIN], { cwd: REPO, env, stdio: ['ignore', 'pipe', 'pipe'] })
  running.add(proc)
  const lines: string[] = []
  const listeners: Array<(line: string) => void> = []
  let stderr = ''
  let buf = ''
  proc.stdout!.setEncoding('utf8')
  proc.stdout!.on('data', (d: string) => {
    buf += d
    for (let nl = buf.indexOf('\n'); nl !== -1; nl = buf.indexOf('\n')) {
      const line = buf.slice(0, nl)
      buf = buf.slice(nl + 1)
      lines.push(line)
      for (const l of listeners) l(line)
    }
  })
  proc.stderr!.setEncoding('utf8')
  proc.stderr!.on('data', (d: string) => { stderr = (stderr + d).slice(-8_000) })
  const exited = new Promise<ChildExit>(resolve => proc.once('close', (code, signal) => {
    running.delete(proc)
    resolve({ code, signal })
  }))
  const pid = proc.pid ?? -1
  let done = false
  void exited.then(() => { done = true })

  function kill(signal: NodeJS.Signals = 'SIGKILL') {
    // By pid, this child only.
    if (!done && pid > 0) {
      try { process.kill(pid, signal) } catch { /* already gone */ }
    }
  }
  t.teardown(async () => {
    if (t.passing && t.comment && !t.passing()) {
      const warnings = lines.filter(l => /"level":(40|50|60)/.test(l))
      const kinds = new Map<string, number>()
      for (const l of warnings) {
        const k = [/"msg":"([^"]*)"/, /"component":"([^"]*)"/, /"code":"([^"]*)"/, /"route":"([^"]*)"/].map(re => re.exec(l)?.[1]).filter(Boolean).join(' / ')
        kinds.set(k, (kinds.get(k) ?? 0) + 1)
      }
      t.comment(`child ${pid}: ${lines.length} log lines, ${warnings.length} warnings/errors: ${[...kinds].map(([k, n]) => `${n} × ${k}`).join('; ')}` +
        `\nlast ones:\n${warnings.slice(-5).map(l => l.slice(0, 600)).join('\n')}${stderr ? `\nstderr: ${stderr.slice(-2_000)}` : ''}`)
    }
    if (done) return
    kill('SIGKILL')
    await exited
  })

  function waitForLine<T>(match: (o: Record<string, unknown>, line: string) => T | undefined, timeoutMs: number, what: string): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      let settled = false
      const test = (line: string) => {
        if (settled || !line.startsWith('{')) return
        let o: Record<string, unknown>
        try { o = JSON.parse(line) as Record<string, unknown> } catch { return }
        const v = match(o, line)
        if (v === undefined) return
        settled = true
        clearTimeout(timer)
        resolve(v)
      }
      const timer = setTimeout(() => {
        if (settled) return
        settled = true
        reject(new Error(`child ${pid}: no ${what} within ${timeoutMs} ms${tail()}`))
      }, timeoutMs)
      for (const l of lines) test(l)
      listeners.push(test)
      void exited.then(x => {
        if (settled) return
        settled = true
        clearTimeout(timer)
        reject(new Error(`child ${pid} exited (code ${x.code}, signal ${x.signal}) before ${what}${tail()}`))
      })
    })
  }
  function tail() {
    const out = (lines.slice(-10).join('\n') + '\n' + stderr).trim()
    return out ? `\n--- last output ---\n${out.slice(-3_000)}` : ''
  }

  const ready = await waitForLine((o) => {
    if (o['msg'] !== 'listening' || typeof o['port'] !== 'number') return undefined
    return { port: o['port'], ms: typeof o['bootMs'] === 'number' ? o['bootMs'] : NaN, liveSessions: typeof o['liveSessions'] === 'number' ? o['liveSessions'] : NaN }
  }, opts.timeoutMs ?? 120_000, 'listening log line').catch(async err => {
    kill('SIGKILL')
    await exited
    throw err
  })
  const listeningAt = Date.now()
  return {
    url: `http://127.0.0.1:${ready.port}`,
    port: ready.port,
    pid,
    boot: { ms: ready.ms, liveSessions: ready.liveSessions },
    listeningAt,
    spawnedAt,
    lines,
    stderr: () => stderr,
    kill,
    async stop(graceMs = 15_000) {
      kill('SIGTERM')
      const timer = setTimeout(() => kill('SIGKILL'), graceMs)
      const x = await exited
      clearTimeout(timer)
      return x
    },
    exited,
    waitForLine,
  }
}

/** Log lines carrying something shaped like a phone number (none may). */
export function linesWithPhoneNumbers(lines: readonly string[]): string[] {
  return lines.filter(l => /\+\d{8,15}/.test(l))
}

// ---------------------------------------------------------------------------------------------
// A small HTTP client for tests against a child: JSON in and out, the answer kept whole.

export interface Res<T = any> {
  status: number
  body: T
  text: string
}

export async function request<T = any>(url: string, method: string, path: string, o: { body?: unknown; token?: string; headers?: Record<string, string>; signal?: AbortSignal } = {}): Promise<Res<T>> {
  const headers: Record<string, string> = { ...o.headers }
  if (o.token) headers['authorization'] = `Bearer ${o.token}`
  let body: string | undefined
  if (o.body !== undefined) { headers['content-type'] = 'application/json'; body = JSON.stringify(o.body) }
  const r = await fetch(url + path, { method, headers, ...(body !== undefined ? { body } : {}), ...(o.signal ? { signal: o.signal } : {}) })
  const text = await r.text()
  let parsed: unknown = text
  try { parsed = text ? JSON.parse(text) : null } catch { /* not JSON */ }
  return { status: r.status, body: parsed as T, text }
}

export interface ChildAccount { tenantId: string; apiKey: string; apiSecret: string; token: string }

let signups = 0

/** Signup, then the API key exchanged for a tenant token. */
export async function signupChild(url: string): Promise<ChildAccount> {
  const n = ++signups
  const body = { companyName: `Durable ${n} ${process.pid} ${randomBytes(4).toString('hex')}`, email: `durable${n}-${process.pid}-${randomBytes(3).toString('hex')}@example.test`, password: `pw-${n}-correct-horse-battery` }
  const s = await request(url, 'POST', '/v1/auth/signup', { body })
  if (s.status !== 201) throw new Error(`signup failed: ${s.status} ${s.text}`)
  const tok = await request(url, 'POST', '/v1/auth/token', { body: { apiKey: s.body.apiKey, apiSecret: s.body.apiSecret } })
  if (tok.status !== 200) throw new Error(`token exchange failed: ${tok.status} ${tok.text}`)
  return { tenantId: s.body.tenantId, apiKey: s.body.apiKey, apiSecret: s.body.apiSecret, token: tok.body.accessToken }
}

/** The pool on `databaseUrl`'s server, for admin statements (CREATE DATABASE, counts). */
export function adminPool(url: string): Promise<DatabasePool> {
  return createPool(url, { maximumPoolSize: 1, captureStackTrace: false, idleTimeout: 1_000 })
}
