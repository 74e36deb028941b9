// What route handlers get from the composition root (gateway/service.ts builds it).
// Handlers depend on this interface, never on how the process was wired.
import type { DatabasePool } from 'slonik'
import type { Logger } from 'pino'

export interface ServiceConfig {
  publicBaseUrl: string
  nodeId: string
  cooldownSeconds: number
  retentionDays: number
  webhookAllowInsecure: boolean
}

export interface Services {
  config: ServiceConfig
  log: Logger
  db: DatabasePool
  /** JWT key (HS256, ≥ 32 bytes). */
  jwtSecret: Uint8Array
  /** Server key for API-secret MACs and, through HKDF, party hashes (DECISIONS 2/3). */
  phoneKey: Buffer
  now(): number
  /** Filled in by the composition root; typed loosely here so api/ does not import gateway/. */
  [extra: string]: unknown
}
