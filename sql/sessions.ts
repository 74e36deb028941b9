// The session store behind the session runner (api/app/session-runner.ts). Postgres is the source
// of truth and the arbiter between nodes: the concurrent-session quota (contract 8.2), the one-tenant
// hold on a proxy (contract D4) and the participant-overlap rule (contract 3.1, the primary key of
// session_participants) are decided here, in the transaction that also writes the outbox events
// and the usage, so an event or a bill exists exactly when its change committed.
//
// Times in SessionRecord are epoch ms; views (what the API returns) carry ISO 8601 strings.
// The store's parts, by concern: session-create(-sql).ts, session-update.ts, session-expiry.ts,
// session-lookup.ts, session-views.ts; this file is their one entry point.
export { bulkInsertSessions, type BulkSessionRow } from './bulk-sessions.js'
export { getLiveSessionState, getSessionRecord, loadLiveSessions, loadTenantsRouting, type SessionCipher } from './session-load.js'
export { DEFAULT_NUMBER_POOL, loadNumbers, parseNumberPool, seedNumbers, type NumberRow, type PoolNumber } from './number-pool.js'
export { createBatchStats, createSession, findIdempotent, type CreateSessionArgs, type CreateSessionResult, type IdempotentReplay } from './session-create.js'
export { createSessionsBatch } from './session-create-sql.js'
export { getLastActivity, updateSession, type SwapArgs, type UpdateSessionArgs } from './session-update.js'
export { endIdleSessions, expireSessions, type IdleEnd } from './session-expiry.js'
export { findLiveByPartyHash, findStickyProxy } from './session-lookup.js'
export { channelNames, getSession, listSessions, type SessionView } from './session-views.js'
