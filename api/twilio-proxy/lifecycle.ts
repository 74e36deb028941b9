// A façade session's life (docs/twilio-proxy.md): open at create (date_started),
// in-progress from its first interaction, closed by the API (`api`), by its Ttl counted from the
// last interaction (`ttl`), by its DateExpiry (`date_expiry`) or by maskline's cap on a session's
// length (`max_duration`: the native maximum, 10080 minutes from the (re)start). Expiry is applied
// when the tenant's façade is next used (one indexed UPDATE per request), and ends the native
// session behind it.
import { closeDueSessions, openSessionsOfService, type SessionRow } from '../../sql/twilio-proxy-sessions.js'
import { sql } from 'slonik'
import { refreshActivity } from '../../sql/twilio-proxy-interactions.js'
import { ts } from '../../sql/transaction.js'
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

/** Ttl in the native unit: whole minutes, rounded up (at least one). */
export function ttlMinutes(ttl: number): number | undefined {
  return ttl > 0 ? Math.min(Math.ceil(ttl / 60), MAX_DURATION_MINUTES) : undefined
}

export const isOpen = (s: SessionRow) => s.status === 'open' || s.status === 'in-progress'

export async function closeDue(c: Ctx): Promise<void> {
  // Due by their own clock: the native sessions' calls and SMS may have moved it on.
  await refreshActivity(c.services.db, sql.fragment`tenant_id = ${c.auth.tenantId} AND expires_at <= ${ts(c.now)}`, MAX_DURATION_MINUTES, c.now)
  const closed = await closeDueSessions(c.services.db, c.auth.tenantId, c.now)
  for (const s of closed) if (s.native_session_id) await endNative(c, s.native_session_id)
}

export async function endNative(c: Ctx, nativeId: string): Promise<void> {
  await c.deps.native.close(c.auth.tenantId, nativeId)
}

/** Before a Service goes: the native sessions of its open sessions end. */
export async function endServiceSessions(c: Ctx, serviceId: string): Promise<void> {
  for (const s of await openSessionsOfService(c.services.db, serviceId)) if (s.native_session_id) await endNative(c, s.native_session_id)
}
