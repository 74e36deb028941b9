// Configuration from the environment (contract D1), validated once at boot. A bad value stops the
// process with a message naming the variable and never echoing a secret's value.
import { randomBytes } from 'node:crypto'
import { mkdirSync, readFileSync, writeFileSync, existsSync, chmodSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { Type, type Static } from '@sinclair/typebox'
import { Value } from '@sinclair/typebox/value'
import { validateSignatureConfig } from '../api/cpaas/signature.js'
import { canonicalIp } from './http/client-ip.js'
import { MasklineError } from '../engine/errors.js'
import { DEFAULT_SIGNUP_MAX_WAIT_MS } from '../api/auth/hash-queue.js'
import { parseNumberPool } from '../sql/number-pool.js'

const Bool = Type.Union([Type.Literal('true'), Type.Literal('false'), Type.Literal('1'), Type.Literal('0')])
const Int = Type.String({ pattern: '^[0-9]+$' })

// Every variable we read, as strings: the schema is the documentation of what is accepted.
export const EnvSchema = Type.Object({
  PORT: Type.Optional(Int),
  HOST: Type.Optional(Type.String({ minLength: 1 })),
  PUBLIC_BASE_URL: Type.Optional(Type.String({ pattern: '^https?://[^\\s]+$' })),
  DATA_DIR: Type.Optional(Type.String({ minLength: 1 })),
  DATABASE_URL: Type.Optional(Type.String({ pattern: '^postgres(ql)?://' })),
  REDIS_URL: Type.Optional(Type.String({ pattern: '^rediss?://' })),
  JWT_SECRET: Type.Optional(Type.String({ minLength: 32 })),
  PHONE_KEY: Type.Optional(Type.String({ pattern: '^[A-Za-z0-9+/]{43}=$' })),
  NUMBER_POOL: Type.Optional(Type.String({ minLength: 1 })),
  NUMBER_COOLDOWN_SECONDS: Type.Optional(Int),
  CPAAS_PROVIDER: Type.Optional(Type.Union([Type.Literal('sandbox'), Type.Literal('telnyx'), Type.Literal('twilio')])),
  CPAAS_SIGNATURE: Type.Optional(Type.Union([Type.Literal('telnyx-ed25519'), Type.Literal('hmac-sha1'), Type.Literal('none')])),
  TELNYX_API_KEY: Type.Optional(Type.String({ minLength: 1 })),
  TELNYX_BASE_URL: Type.Optional(Type.String({ pattern: '^https?://.+/v2$' })),
  TELNYX_PUBLIC_KEY: Type.Optional(Type.String({ pattern: '^[A-Za-z0-9+/]{43}=$' })),
  TELNYX_MESSAGING_PROFILE_ID: Type.Optional(Type.String({ minLength: 1 })),
  TELNYX_BACKUP_API_KEY: Type.Optional(Type.String({ minLength: 1 })),
  TELNYX_BACKUP_BASE_URL: Type.Optional(Type.String({ pattern: '^https?://.+/v2$' })),
  CPAAS_HMAC_SECRET: Type.Optional(Type.String({ minLength: 16 })),
  TWILIO_ACCOUNT_SID: Type.Optional(Type.String({ pattern: '^AC[0-9a-fA-F]{32}$' })),
  TWILIO_AUTH_TOKEN: Type.Optional(Type.String({ pattern: '^[0-9a-fA-F]{32}$' })),
  TWILIO_API_KEY: Type.Optional(Type.String({ pattern: '^SK[0-9a-fA-F]{32}$' })),
  TWILIO_API_SECRET: Type.Optional(Type.String({ minLength: 16 })),
  TWILIO_BASE_URL: Type.Optional(Type.String({ pattern: '^https?://[^\\s]+$' })),
  WEBHOOK_ALLOW_INSECURE: Type.Optional(Bool),
  TWILIO_PROXY_INTERCEPT_TIMEOUT_MS: Type.Optional(Int),
  RETENTION_DAYS: Type.Optional(Int),
  TRUSTED_PROXY: Type.Optional(Type.String({ minLength: 1 })),
  SHUTDOWN_GRACE_SECONDS: Type.Optional(Int),
  RECORD_FLUSH_MS: Type.Optional(Int),
  STREAM_REPLAY_HOURS: Type.Optional(Int),
  STREAM_SETTLE_MS: Type.Optional(Int),
  RECONCILE_MS: Type.Optional(Int),
  BUS_MAXLEN: Type.Optional(Int),
  BUS_STREAM: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
  METRICS_PORT: Type.Optional(Type.Union([Int, Type.Literal('off')])),
  ACCESS_LOG: Type.Optional(Type.Union([Type.Literal('all'), Type.Literal('failures')])),
  SIGNUP_MAX_WAIT_MS: Type.Optional(Int),
  LOG_LEVEL: Type.Optional(Type.Union(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map(l => Type.Literal(l)))),
})
type Env = Static<typeof EnvSchema>

const SECRET_VARS = new Set(['JWT_SECRET', 'PHONE_KEY', 'TELNYX_API_KEY', 'TELNYX_BACKUP_API_KEY', 'CPAAS_HMAC_SECRET', 'TWILIO_AUTH_TOKEN', 'TWILIO_API_KEY', 'TWILIO_API_SECRET', 'DATABASE_URL', 'REDIS_URL'])

export interface Config {
  port: number
  host: string
  /** PUBLIC_BASE_URL; null when unset: the service then uses http://HOST:<bound port> (PORT=0 included). */
  publicBaseUrl: string | null
  dataDir: string
  databaseUrl: string | undefined
  redisUrl: string | undefined
  jwtSecret: Uint8Array
  phoneKey: Buffer
  numberPool: string
  cooldownSeconds: number
  /** CPAAS_PROVIDER: the provider of NUMBER_POOL entries without `@provider`. */
  provider: 'sandbox' | 'telnyx' | 'twilio'
  /** CPAAS_SIGNATURE: how the callbacks under /v1/webhooks/cpaas are checked (Twilio's own are always checked with its Auth Token). */
  signature: 'telnyx-ed25519' | 'hmac-sha1' | 'none'
  telnyx: { apiKey?: string; baseUrl?: string; publicKey?: string; messagingProfileId?: string; backupApiKey?: string; backupBaseUrl?: string }
  /** Twilio, when TWILIO_ACCOUNT_SID is set: REST credentials (the Auth Token, or an API key pair) and the webhook token. */
  twilio: { accountSid: string; authToken: string; apiKey?: string; apiSecret?: string; baseUrl?: string } | null
  hmacSecret: string | undefined
  webhookAllowInsecure: boolean
  /** TWILIO_PROXY_INTERCEPT_TIMEOUT_MS: how long a call or SMS waits for a Service's intercept callback (default 2000). */
  interceptTimeoutMs: number
  retentionDays: number
  /** TRUSTED_PROXY: the terminators whose X-Forwarded-For is believed (canonical spellings). */
  trustedProxies: string[]
  /** SIGTERM: how long in-flight work may drain (contract D1). */
  shutdownGraceSeconds: number
  logLevel: string
  /** METRICS_PORT: the Prometheus listener's port on HOST (0: any free port), null when 'off'. */
  metricsPort: number | null
  /** RECORD_FLUSH_MS: the record writer's group-commit interval (default 10). */
  recordFlushMs: number
  /** STREAM_REPLAY_HOURS: how far back `GET /v1/stream?after=` resumes (default 24, at most the retention). */
  streamReplayHours: number
  /** STREAM_SETTLE_MS: how long a live stream event is held to go out in id order (default 1000, gateway/stream/settle.ts). */
  streamSettleMs: number
  /** ACCESS_LOG: 'all' writes a line per request; 'failures' only answers ≥ 400 and slow ones. */
  accessLog: 'all' | 'failures'
  /** RECONCILE_MS: the period of the reconciliation sweep from Postgres (docs/scaling.md; default 30 s). */
  reconcileMs: number
  /** BUS_MAXLEN: the approximate length the Redis bus stream is trimmed to (default 100,000). */
  busMaxLen: number
  /** BUS_STREAM: the Redis stream of the bus (default `maskline:bus:<database instance id>`, gateway/bus.ts). */
  busStream: string | undefined
  /** SIGNUP_MAX_WAIT_MS: the longest a signup waits for a password-hashing slot (api/auth/hash-queue.ts). */
  signupMaxWaitMs: number
}

export class ConfigError extends MasklineError {
  constructor(message: string) {
    super('ML_ERR_CONFIG', message)
  }
}

export const DEFAULT_NUMBER_POOL = 'US:+12025550100-+12025550199'

/** Reads and validates the environment; generates embedded-mode secrets into DATA_DIR once. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const picked: Record<string, string> = {}
  for (const key of Object.keys(EnvSchema.properties)) {
    const v = env[key]
    if (v !== undefined && v !== '') picked[key] = v
  }
  const problems = [...Value.Errors(EnvSchema, picked)]
  if (problems.length) {
    const names = [...new Set(problems.map(p => p.path.replace(/^\//, '')))]
    const detail = names.map(n => SECRET_VARS.has(n) ? `${n} (value hidden)` : `${n}=${JSON.stringify(picked[n])}`)
    throw new ConfigError(`invalid configuration: ${detail.join(', ')}`)
  }
  const e = picked as Env

  const port = e.PORT !== undefined ? Number(e.PORT) : 8080
  if (port > 65535) throw new ConfigError('invalid configuration: PORT must be 0-65535')
  const host = e.HOST ?? '127.0.0.1'
  const metricsPort = e.METRICS_PORT === 'off' ? null : e.METRICS_PORT !== undefined ? Number(e.METRICS_PORT) : 9464
  if (metricsPort !== null && metricsPort > 65535) throw new ConfigError('invalid configuration: METRICS_PORT must be 0-65535 or off')
  const dataDir = resolve(e.DATA_DIR ?? './data')
  const provider = e.CPAAS_PROVIDER ?? (e.TELNYX_API_KEY ? 'telnyx' : e.TWILIO_ACCOUNT_SID ? 'twilio' : 'sandbox')
  // /v1/webhooks/cpaas serves Telnyx whenever Telnyx is configured, whichever provider is the default.
  const signature = e.CPAAS_SIGNATURE ?? (provider === 'sandbox' ? 'none' : e.TELNYX_API_KEY || provider === 'telnyx' ? 'telnyx-ed25519' : 'hmac-sha1')
  const twilio = twilioConfig(e)
  if (provider === 'twilio' && !twilio) throw new ConfigError('invalid configuration: TWILIO_ACCOUNT_SID and TWILIO_AUTH_TOKEN are required with CPAAS_PROVIDER=twilio')
  // The /v1/webhooks/cpaas callbacks of a Twilio deployment are signed with its Auth Token unless told otherwise.
  const hmacSecret = e.CPAAS_HMAC_SECRET ?? (provider === 'twilio' ? twilio?.authToken : undefined)
  poolProviders(e.NUMBER_POOL ?? DEFAULT_NUMBER_POOL, provider, { telnyx: !!e.TELNYX_API_KEY, twilio: !!twilio })
  // One rule, one place: the refusal of unsigned callbacks lives with the verifiers.
  try {
    validateSignatureConfig(provider, signature)
  } catch (err) {
    throw new ConfigError(`invalid configuration: ${(err as Error).message}`)
  }
  if (provider === 'telnyx' && !e.TELNYX_API_KEY) throw new ConfigError('invalid configuration: TELNYX_API_KEY is required with CPAAS_PROVIDER=telnyx')
  if (signature === 'telnyx-ed25519' && !e.TELNYX_PUBLIC_KEY) throw new ConfigError('invalid configuration: TELNYX_PUBLIC_KEY is required with CPAAS_SIGNATURE=telnyx-ed25519')
  if (signature === 'hmac-sha1' && !hmacSecret) throw new ConfigError('invalid configuration: CPAAS_HMAC_SECRET is required with CPAAS_SIGNATURE=hmac-sha1')
  const retentionDays = e.RETENTION_DAYS !== undefined ? Number(e.RETENTION_DAYS) : 90
  if (retentionDays < 30) throw new ConfigError('invalid configuration: RETENTION_DAYS must be at least 30')
  const streamReplayHours = e.STREAM_REPLAY_HOURS !== undefined ? Number(e.STREAM_REPLAY_HOURS) : 24
  // The replay reads the outbox, which sql/retention.ts never purges; the bound keeps it that way
  // for any later purge, which must keep at least RETENTION_DAYS.
  if (streamReplayHours < 1 || streamReplayHours > retentionDays * 24) throw new ConfigError('invalid configuration: STREAM_REPLAY_HOURS must be 1 to RETENTION_DAYS × 24')
  const trustedProxies = (e.TRUSTED_PROXY ?? '').split(',').map(p => p.trim()).filter(Boolean).map(p => canonicalIp(p) ?? '')
  if (trustedProxies.includes('')) throw new ConfigError(`invalid configuration: TRUSTED_PROXY=${JSON.stringify(e.TRUSTED_PROXY)} must be IP addresses, comma-separated`)

  let jwtSecret: Uint8Array
  let phoneKey: Buffer
  if (e.DATABASE_URL) {
    // A shared database means several nodes: they must share keys, so nothing is generated.
    if (!e.JWT_SECRET) throw new ConfigError('invalid configuration: JWT_SECRET is required when DATABASE_URL is set')
    if (!e.PHONE_KEY) throw new ConfigError('invalid configuration: PHONE_KEY is required when DATABASE_URL is set')
    jwtSecret = new TextEncoder().encode(e.JWT_SECRET)
    phoneKey = Buffer.from(e.PHONE_KEY, 'base64')
  } else {
    jwtSecret = e.JWT_SECRET ? new TextEncoder().encode(e.JWT_SECRET) : new TextEncoder().encode(secretFile(dataDir, 'jwt-secret', () => randomBytes(48).toString('base64url')))
    phoneKey = Buffer.from(e.PHONE_KEY ?? secretFile(dataDir, 'phone-key', () => randomBytes(32).toString('base64')), 'base64')
  }

  return {
    port,
    host,
    publicBaseUrl: e.PUBLIC_BASE_URL !== undefined ? e.PUBLIC_BASE_URL.replace(/\/$/, '') : null,
    dataDir,
    databaseUrl: e.DATABASE_URL,
    redisUrl: e.REDIS_URL,
    jwtSecret,
    phoneKey,
    numberPool: e.NUMBER_POOL ?? DEFAULT_NUMBER_POOL,
    cooldownSeconds: e.NUMBER_COOLDOWN_SECONDS !== undefined ? Number(e.NUMBER_COOLDOWN_SECONDS) : 900,
    provider,
    signature,
    telnyx: {
      apiKey: e.TELNYX_API_KEY,
      baseUrl: e.TELNYX_BASE_URL,
      publicKey: e.TELNYX_PUBLIC_KEY,
      messagingProfileId: e.TELNYX_MESSAGING_PROFILE_ID,
      backupApiKey: e.TELNYX_BACKUP_API_KEY,
      backupBaseUrl: e.TELNYX_BACKUP_BASE_URL,
    },
    twilio,
    hmacSecret,
    webhookAllowInsecure: e.WEBHOOK_ALLOW_INSECURE === 'true' || e.WEBHOOK_ALLOW_INSECURE === '1',
    interceptTimeoutMs: e.TWILIO_PROXY_INTERCEPT_TIMEOUT_MS !== undefined ? Math.max(1, Number(e.TWILIO_PROXY_INTERCEPT_TIMEOUT_MS)) : 2_000,
    retentionDays,
    trustedProxies,
    shutdownGraceSeconds: e.SHUTDOWN_GRACE_SECONDS !== undefined ? Number(e.SHUTDOWN_GRACE_SECONDS) : 10,
    logLevel: e.LOG_LEVEL ?? 'info',
    metricsPort,
    recordFlushMs: e.RECORD_FLUSH_MS !== undefined ? Math.max(1, Number(e.RECORD_FLUSH_MS)) : 10,
    streamReplayHours,
    streamSettleMs: e.STREAM_SETTLE_MS !== undefined ? Math.min(60_000, Number(e.STREAM_SETTLE_MS)) : 1_000,
    accessLog: e.ACCESS_LOG ?? 'all',
    reconcileMs: e.RECONCILE_MS !== undefined ? Math.max(100, Number(e.RECONCILE_MS)) : 30_000,
    busMaxLen: e.BUS_MAXLEN !== undefined ? Math.max(100, Number(e.BUS_MAXLEN)) : 100_000,
    busStream: e.BUS_STREAM,
    signupMaxWaitMs: e.SIGNUP_MAX_WAIT_MS !== undefined ? Number(e.SIGNUP_MAX_WAIT_MS) : DEFAULT_SIGNUP_MAX_WAIT_MS,
  }
}

/** TWILIO_*: all or nothing. The Auth Token is required even with an API key pair: Twilio signs
 * its webhooks with it. */
function twilioConfig(e: Env): Config['twilio'] {
  const any = e.TWILIO_ACCOUNT_SID ?? e.TWILIO_AUTH_TOKEN ?? e.TWILIO_API_KEY ?? e.TWILIO_API_SECRET ?? e.TWILIO_BASE_URL
  if (any === undefined) return null
  if (!e.TWILIO_ACCOUNT_SID || !e.TWILIO_AUTH_TOKEN) {
    throw new ConfigError('invalid configuration: TWILIO_ACCOUNT_SID and TWILIO_AUTH_TOKEN are both required when any TWILIO_ variable is set (Twilio signs its webhooks with the Auth Token)')
  }
  if (!e.TWILIO_API_KEY !== !e.TWILIO_API_SECRET) throw new ConfigError('invalid configuration: TWILIO_API_KEY and TWILIO_API_SECRET go together')
  return {
    accountSid: e.TWILIO_ACCOUNT_SID, authToken: e.TWILIO_AUTH_TOKEN,
    ...(e.TWILIO_API_KEY ? { apiKey: e.TWILIO_API_KEY, apiSecret: e.TWILIO_API_SECRET! } : {}),
    ...(e.TWILIO_BASE_URL ? { baseUrl: e.TWILIO_BASE_URL.replace(/\/+$/, '') } : {}),
  }
}

/** Every provider NUMBER_POOL names (`@twilio`, or CPAAS_PROVIDER by default) must be configured. */
function poolProviders(spec: string, provider: Config['provider'], configured: Record<'telnyx' | 'twilio', boolean>): void {
  let numbers
  try {
    numbers = parseNumberPool(spec)
  } catch (err) {
    throw new ConfigError(`invalid configuration: ${(err as Error).message}`)
  }
  const named = new Set(numbers.flatMap(n => n.provider?.split('+') ?? []))
  for (const p of named) {
    if (!configured[p as 'telnyx' | 'twilio']) {
      const need = p === 'twilio' ? 'TWILIO_ACCOUNT_SID and TWILIO_AUTH_TOKEN' : 'TELNYX_API_KEY'
      throw new ConfigError(`invalid configuration: NUMBER_POOL names @${p} numbers, which need ${need}`)
    }
  }
  if (provider === 'sandbox' && named.size > 0) throw new ConfigError('invalid configuration: NUMBER_POOL names a provider while CPAAS_PROVIDER=sandbox')
}

/** The listener's own URL: the base URL when PUBLIC_BASE_URL is unset, with the port it is bound to. */
export function listenerUrl(host: string, port: number): string {
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}`
}

// Generated once, mode 0600, reused on every later start (contract D1, embedded mode only).
function secretFile(dataDir: string, name: string, make: () => string): string {
  const dir = join(dataDir, 'secrets')
  const file = join(dir, name)
  if (existsSync(file)) return readFileSync(file, 'utf8').trim()
  mkdirSync(dir, { recursive: true, mode: 0o700 })
  const value = make()
  try {
    writeFileSync(file, value + '\n', { mode: 0o600, flag: 'wx' })
  } catch (err) {
    // Another process starting on the same DATA_DIR won the race: use its secret.
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return readFileSync(file, 'utf8').trim()
    throw err
  }
  chmodSync(file, 0o600)
  return value
}
