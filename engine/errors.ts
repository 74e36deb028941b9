// Programming and integration errors (never user input): thrown, not returned as rejections.

/** The engine was asked about a tenant it was never given (upsertTenant first). */
export class UnknownTenantError extends Error {
  readonly tenantId: string
  constructor(tenantId: string) {
    super(`engine: unknown tenant ${tenantId}`)
    this.tenantId = tenantId
    this.name = 'UnknownTenantError'
  }
}

/**
 * commit() was handed a session that would share its proxy with a live session of another tenant,
 * or with a live session sharing a participant (spec 3.1): two plans raced for one number. The
 * store is expected to refuse such a write first. The message names ids only, never numbers.
 */
export class IndexConflictError extends Error {
  readonly sessionId: string
  constructor(sessionId: string, detail: string) {
    super(`engine: session ${sessionId} cannot go live: ${detail}`)
    this.sessionId = sessionId
    this.name = 'IndexConflictError'
  }
}
