// A façade session's life (docs/twilio-proxy.md): open at create (date_started),
// in-progress from its first interaction, closed by the API (`api`), by its Ttl counted from the
// last interaction (`ttl`), by its DateExpiry (`date_expiry`) or by maskline's cap on a session's
// length (`max_duration`: the native maximum, 10080 minutes from the (re)start). Expiry is applied
// when the tenant's façade is next used (one indexed UPDATE per request), and ends the native
// session behind it.
import { closeDueSessions, openSessionsOfService, type SessionRow } from '../../sql/twilio-proxy-sessions.js'
import { sql } from 'slonik'
import { refreshActivity } from '../../sql/twilio-proxy-interactions.js'
import { ts, type Db } from '../../sql/transaction.js'
import type { PinnedSessions } from './native.js'
import type { Ctx } from './context.js'

/** The native maximum session length (api/schemas/session.ts maxDurationMinutes). */
export const MAX_DURATION_MINUTES = 10_080
export const MAX_DURATION_MS = MAX_DURATION_MINUTES * 60_000

/** When the session closes by itself. */
export function expiryOf(s: { ttl: number; date_expiry: number | null; date_started: number | null; date_last_interaction: number | null }, now: number): number {
  const start = s.date_started ?? now
  const cap = start + MAX_DURATION_MS
  if (s.date_expiry !== null) return Math.min(s.date_expiry, cap)
  if (s.ttl > 0) return Math.min(Math.max(start, s.date_last_interaction ?? 0) + s.ttl * 1000, cap)
  return cap
}

export const isOpen = (s: SessionRow) => s.status === 'open' || s.status === 'in-progress'

/**
 * Closes what is due (one tenant's sessions, or every tenant's: the sweep), the native sessions
 * behind them with it. Calls and SMS may have moved a due session on: its activity is read first.
 */
export async function expireDue(db: Db, native: PinnedSessions, now: number, tenantId?: string): Promise<number> {
  const tenant = tenantId === undefined ? sql.fragment`` : sql.fragment`tenant_id = ${tenantId} AND`
  await refreshActivity(db, sql.fragment`${tenant} expires_at <= ${ts(now)}`, MAX_DURATION_MINUTES, now)
  const closed = await closeDueSessions(db, tenantId ?? null, now)
  for (const s of closed) if (s.native_session_id) await native.close(s.tenant_id, s.native_session_id)
  return closed.length
}

/** Before a request reads or changes the tenant's sessions. */
export const closeDue = (c: Ctx): Promise<number> => expireDue(c.services.db, c.deps.native, c.now, c.auth.tenantId)

export async function endNative(c: Ctx, nativeId: string): Promise<void> {
  await c.deps.native.close(c.auth.tenantId, nativeId)
}

/** Before a Service goes: the native sessions of its open sessions end. */
export async function endServiceSessions(c: Ctx, serviceId: string): Promise<void> {
  for (const s of await openSessionsOfService(c.services.db, serviceId)) if (s.native_session_id) await endNative(c, s.native_session_id)
}
