// The service under test: the compiled entry (dist/gateway/main.js, rebuilt when a source is newer)
// as a child process on the server core, configured only through its environment (contract D1),
// logging at info to a file. Same code path as production: no bench switches exist, and the Node
// flags are those of `npm start` (package.json), read from there.
import { spawnSync } from 'node:child_process'
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { EnvSchema } from '../../gateway/config.js'
import type { BenchDatabase } from '../lib/database.js'
import { numberPoolFor } from '../lib/population.js'
import { freePort, rssOf, sleep, startChild, type Child } from '../lib/proc.js'
import { progress } from '../lib/results.js'
import type { Ctx } from './common.js'

export const SERVICE_SOURCE = 'gateway/service.ts'
const ENTRY = 'dist/gateway/main.js'
const SOURCE_DIRS = ['engine', 'gateway', 'api', 'sql']

function newestMtime(dir: string): number {
  let newest = 0
  if (!existsSync(dir)) return 0
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name)
    if (e.isDirectory()) newest = Math.max(newest, newestMtime(p))
    else if (/\.(ts|sql)$/.test(e.name)) newest = Math.max(newest, statSync(p).mtimeMs)
  }
  return newest
}

/** The Node flags `npm start` runs the service with (`node <flags> dist/gateway/main.js`). */
export function startNodeFlags(): string[] {
  const start = (JSON.parse(readFileSync('package.json', 'utf8')) as { scripts: { start: string } }).scripts.start
  const m = /\bnode((?:\s+--\S+)*)\s+dist\/gateway\/main\.js/.exec(start)
  if (!m) throw new Error(`package.json scripts.start does not run node … ${ENTRY}: ${start}`)
  return m[1]!.trim().split(/\s+/).filter(Boolean)
}

/**
 * How to start the service: the compiled entry, unless dist/ cannot run (the build copies no
 * .sql files, so dist/sql/migrations/ may be missing); then the same sources through tsx. Either
 * way with `npm start`'s Node flags, and BENCH_NODE_FLAGS after them for a diagnosis (e.g.
 * `--trace-gc`: the collector's pauses land in the service's log; the run's report names the flags).
 */
const NODE_FLAGS = [...startNodeFlags(), ...(process.env.BENCH_NODE_FLAGS?.trim().split(/\s+/).filter(Boolean) ?? [])]
let entryArgs: string[] = [...NODE_FLAGS, ENTRY]
export let serviceEntry = [...NODE_FLAGS, ENTRY].join(' ')

/** The service's command line (Node flags, entry) as ensureServiceBuilt() left it. */
export function serviceArgs(): readonly string[] {
  return entryArgs
}

/** null when the service can run; otherwise why not. Runs `npm run build` when dist/ is stale. */
export function ensureServiceBuilt(): string | null {
  if (!existsSync(SERVICE_SOURCE)) return `${SERVICE_SOURCE} does not exist yet (the composition root is being written)`
  const built = existsSync(ENTRY) && existsSync('dist/gateway/service.js') ? statSync('dist/gateway/service.js').mtimeMs : 0
  const newest = Math.max(...SOURCE_DIRS.map(newestMtime))
  if (built >= newest) {
    progress(`dist/ is up to date (${ENTRY})`)
    return checkMigrations()
  }
  progress(`dist/ is ${built ? 'older than the sources' : 'missing'}: npm run build`)
  const t0 = Date.now()
  const r = spawnSync('npm', ['run', 'build', '--silent'], { encoding: 'utf8', timeout: 300_000 })
  const out = `${r.stdout ?? ''}${r.stderr ?? ''}`.trim()
  const fresh = existsSync('dist/gateway/service.js') && statSync('dist/gateway/service.js').mtimeMs > built
  if (r.status !== 0) {
    const first = out.split('\n').find(l => /error/i.test(l)) ?? out.split('\n')[0] ?? ''
    // tsc emits even with type errors; a fresh dist/ can still run, and the report says so.
    if (!fresh) return `npm run build failed: ${first}`
    progress(`npm run build reported errors but emitted dist/ (${first})`)
  }
  progress(`built in ${Date.now() - t0} ms`)
  return checkMigrations()
}

function checkMigrations(): null {
  if (existsSync('dist/sql/migrations') || !existsSync('sql/migrations')) return null
  entryArgs = [...NODE_FLAGS, '--import', 'tsx', 'gateway/main.ts']
  serviceEntry = `${NODE_FLAGS.join(' ')} gateway/main.ts through tsx (dist/sql/migrations/ is missing: npm run build copies no .sql files)`.trim()
  progress(`service entry: ${serviceEntry}`)
  return null
}

export interface ServiceConfig {
  /** Log file and progress name, e.g. `none`, `hmac-sha1`, `telnyx`. */
  name: string
  signature: 'none' | 'hmac-sha1' | 'telnyx-ed25519'
  /** Set: CPAAS_PROVIDER=telnyx against this fake base URL (…/v2). */
  telnyxBaseUrl?: string
  /** Configuration this run adds (e.g. METRICS_PORT of a second node on the same machine). */
  env?: Record<string, string>
}

export interface Service {
  url: string
  port: number
  pid: number
  /** Spawn to the "listening" log line: process start, module loading, database, rebuild. */
  bootMs: number
  /** What the service logs as its own boot time (startService → listening), when it does. */
  serviceBootMs: number | undefined
  /** Live sessions the service says it rebuilt. */
  liveSessions: number | undefined
  rssBytes: number
  logFile: string
  /** With --profile: where the service writes its `.cpuprofile` when it exits. */
  profileDir?: string
  child: Child
  stop(): Promise<void>
}

const CONFIG_VARS = new Set(Object.keys(EnvSchema.properties))

export function serviceEnv(ctx: Ctx, db: BenchDatabase, cfg: ServiceConfig, port: number): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {}
  // Only what this run decides: nothing from the caller's shell may change the configuration.
  for (const [k, v] of Object.entries(process.env)) if (!CONFIG_VARS.has(k) && !k.startsWith('TELNYX_')) env[k] = v
  Object.assign(env, db.env, {
    PORT: String(port),
    HOST: '127.0.0.1',
    PUBLIC_BASE_URL: `http://127.0.0.1:${port}`,
    JWT_SECRET: ctx.keys.jwtSecret,
    PHONE_KEY: ctx.keys.phoneKey,
    NUMBER_POOL: numberPoolFor(ctx.pop),
    CPAAS_SIGNATURE: cfg.signature,
    LOG_LEVEL: 'info',
  })
  if (process.env.REDIS_URL) env.REDIS_URL = process.env.REDIS_URL
  if (cfg.signature === 'hmac-sha1') env.CPAAS_HMAC_SECRET = ctx.keys.hmacSecret
  if (cfg.signature === 'telnyx-ed25519') env.TELNYX_PUBLIC_KEY = ctx.keys.telnyx.publicKeyBase64
  if (cfg.telnyxBaseUrl) {
    env.CPAAS_PROVIDER = 'telnyx'
    env.TELNYX_API_KEY = 'KEY_bench_fake'
    env.TELNYX_BASE_URL = cfg.telnyxBaseUrl
  } else {
    env.CPAAS_PROVIDER = 'sandbox'
  }
  if (cfg.env) Object.assign(env, cfg.env)
  return env
}

/** The service's own "listening" log line (pino JSON), with its timestamp. */
interface Listening { time: number; liveSessions?: number; bootMs?: number }

function listeningLine(line: string): Listening | undefined {
  if (!line.startsWith('{') || !/listening/i.test(line)) return undefined
  try {
    const o = JSON.parse(line) as { msg?: unknown; time?: unknown; liveSessions?: unknown; bootMs?: unknown }
    if (typeof o.msg !== 'string' || !/listening/i.test(o.msg)) return undefined
    return {
      time: typeof o.time === 'number' ? o.time : Date.now(),
      ...(typeof o.liveSessions === 'number' ? { liveSessions: o.liveSessions } : {}),
      ...(typeof o.bootMs === 'number' ? { bootMs: o.bootMs } : {}),
    }
  } catch { /* not JSON */ }
  return undefined
}

export async function startService(ctx: Ctx, db: BenchDatabase, cfg: ServiceConfig, port?: number): Promise<Service> {
  port ??= await freePort()
  const logFile = `${ctx.logPrefix}.service-${cfg.name}.log`
  const profileDir = ctx.opts.profile ? `${ctx.logPrefix}.profile-${cfg.name}` : undefined
  progress(`service (${cfg.name}): starting ${entryArgs.at(-1)} on port ${port}, ${ctx.pop.sessions.toLocaleString('en')} live sessions to rebuild; log ${logFile}`)
  const child = startChild({
    name: `service (${cfg.name})`, cmd: process.execPath, args: profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`, ...entryArgs] : entryArgs, core: ctx.pin.serverCore, pin: ctx.pin,
    env: serviceEnv(ctx, db, cfg, port), logFile,
  })
  const ready = await child.waitFor(listeningLine, Math.max(120_000, ctx.pop.sessions / 2), 'its "listening" log line')
  const bootMs = ready.time - child.startedAt
  await sleep(200)
  const rssBytes = rssOf(child.pid)
  progress(`service (${cfg.name}): listening after ${bootMs} ms (startService ${ready.bootMs ?? '?'} ms), ` +
    `${ready.liveSessions?.toLocaleString('en') ?? '?'} live sessions, RSS ${Math.round(rssBytes / 2 ** 20)} MiB`)
  return {
    url: `http://127.0.0.1:${port}`, port, pid: child.pid, bootMs, serviceBootMs: ready.bootMs, liveSessions: ready.liveSessions, rssBytes, logFile, ...(profileDir ? { profileDir } : {}), child,
    async stop() {
      await child.stop(15_000)
    },
  }
}
