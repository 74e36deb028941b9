// Programming and integration errors (never user input): thrown, not returned as rejections.

/**
 * The base of every internal error class, after undici's `UND_ERR_*` codes and slonik's
 * error tree: `name` is the class name, `code` a stable string that logs, metrics and callers key
 * on instead of messages or `instanceof` across module copies. Our own conditions use
 * `ML_ERR_<WHAT>`; an error that wraps a foreign one keeps the foreign code where that is what
 * callers act on (StoreError: the SQLSTATE or errno; ProviderError: the provider code). Messages
 * name ids, never a phone number, a secret or a token. It lives in engine/ because every layer
 * may import the engine (test/layering.test.ts); the HTTP problem catalog (api/problems.ts) is a
 * separate, public vocabulary that ApiProblem carries as its slug.
 */
export class MasklineError extends Error {
  readonly code: string
  constructor(code: string, message: string, options?: ErrorOptions) {
    super(message, options)
    this.name = new.target.name
    this.code = code
  }
}

/** The engine was asked about a tenant it was never given (upsertTenant first). */
export class UnknownTenantError extends MasklineError {
  readonly tenantId: string
  constructor(tenantId: string) {
    super('ML_ERR_UNKNOWN_TENANT', `engine: unknown tenant ${tenantId}`)
    this.tenantId = tenantId
  }
}

/**
 * commit() was handed a session that would share its proxy with a live session of another tenant,
 * or with a live session sharing a participant (contract 3.1): two plans raced for one number. The
 * store is expected to refuse such a write first. The message names ids only, never numbers.
 */
export class IndexConflictError extends MasklineError {
  readonly sessionId: string
  constructor(sessionId: string, detail: string) {
    super('ML_ERR_INDEX_CONFLICT', `engine: session ${sessionId} cannot go live: ${detail}`)
    this.sessionId = sessionId
  }
}
