// What route handlers get from the composition root (gateway/compose.ts builds it).
// Handlers depend on these structural interfaces, never on how the process was wired.
import type { DatabasePool } from 'slonik'
import type { Logger } from 'pino'
import type { CreateSessionBody, PatchSessionBody, SessionView } from './schemas/session.js'
import type { JsonText } from './route.js'
import type { TenantRouting } from '../engine/types.js'
import type { RateLimiter } from './rate-limit/limiter.js'
import type { PinnedCreateInput } from './app/pinned-create.js'
import type { BindResult, UnbindResult } from '../sql/number-binding.js'
import type { SessionRecord } from '../engine/types.js'
import type { Authenticator } from './auth/authenticate.js'

export interface ServiceConfig {
  publicBaseUrl: string
  nodeId: string
  cooldownSeconds: number
  retentionDays: number
  webhookAllowInsecure: boolean
  /** TRUSTED_PROXY (contract D1): peers whose X-Forwarded-For is believed. None: the peer is the client. */
  trustedProxies?: readonly string[]
}

export interface SessionCommands {
  create(tenantId: string, body: CreateSessionBody, idempotency?: { key: string; requestHash: string }):
    Promise<{ status: number; body: unknown; replayed: boolean }>
  /** Synchronous for a live session (answered from memory as JSON text, contract D4); a promise otherwise. */
  get(tenantId: string, id: string): JsonText | SessionView | Promise<SessionView>
  end(tenantId: string, id: string): Promise<SessionView>
  patch(tenantId: string, id: string, body: PatchSessionBody): Promise<SessionView>
  swapTarget(tenantId: string, id: string, customerPhone: string): Promise<SessionView>
  /** GET /v1/sessions/verify: the newest ACTIVE or GRACE_PERIOD session this number takes part in. */
  verify(tenantId: string, userPhone: string): Promise<{ sessionId: string; proxyNumber: string; metadata: Record<string, unknown> } | null>
  /**
   * docs/dual-proxy.md: a session on the numbers given (never allocation); throws ApiProblem
   * 'proxy-in-use', 'proxy-unavailable', 'tier-session-limit', 'validation' (api/app/pinned-create.ts).
   */
  createPinned(tenantId: string, body: PinnedCreateInput): Promise<SessionRecord>
  /** docs/dual-proxy.md: the number serves this tenant's pinned creates only. */
  bindNumber(tenantId: string, number: string): Promise<BindResult>
  unbindNumber(tenantId: string, number: string): Promise<UnbindResult>
}

/** Contract 2.9, one per region and provider. */
export interface PoolEntry { region: string; provider?: string; total: number; available: number; inUse: number; cooldown: number }

/** Contract 4.11. `openedAt` in epoch ms or ISO 8601. */
export interface ProviderHealth { name: string; state: 'CLOSED' | 'OPEN' | 'HALF_OPEN'; openedAt: number | string | null; lastError: string | null }

export interface Services {
  config: ServiceConfig
  log: Logger
  db: DatabasePool
  /** JWT key (HS256, ≥ 32 bytes). */
  jwtSecret: Uint8Array
  /** Server key for API-secret MACs and, through HKDF, party hashes (contract D2/D3). */
  phoneKey: Buffer
  /** HMAC of a party number under the tenant's salt (contract D2). */
  hashParty(salt: Buffer, e164: string): string
  now(): number
  /**
   * Bearer tokens, token exchange and tenant status (api/auth/authenticate.ts), over the tenant
   * directory; the one instance shared by the HTTP routes and the WebSocket upgrade.
   */
  authenticator: Authenticator
  sessions: SessionCommands
  /** Sliding-window limiter (contract 8): api/rate-limit/limiter.ts composeRateLimiter, over Redis with REDIS_URL. */
  rateLimiter: RateLimiter
  /** Pool counts per region and provider (contract 4.8), from the engine. */
  poolCounts: () => PoolEntry[]
  /** Provider circuit breakers (contract 4.11); an empty list for the sandbox. */
  cpaasHealth: () => ProviderHealth[]
  /**
   * Called after a tenant, its configuration or its API keys changed through this node; the
   * change is answered for once the promise settles (the other nodes have been told).
   */
  onTenantChanged: (tenant: TenantRouting) => void | Promise<void>
  /** The webhook dispatcher (gateway/webhooks/dispatcher.ts), told to poll after a route wrote outbox rows. */
  webhookDispatcher: WebhookWake
}

/** What the routes need of the webhook dispatcher (structural, so api/ imports nothing of gateway/). */
export interface WebhookWake {
  wake(): void
}
