// Per-account sign-in throttle (contract 8.4). The per-address throttle bounds one client; a guess
// spread over many addresses needs a bound on the account itself: after ACCOUNT_FAILURE_LIMIT
// failed sign-ins within ACCOUNT_WINDOW_MS, the account is refused (429) from every address
// until the oldest of those failures ages out. Unknown emails are throttled the same way, so the
// 429 says nothing about which emails exist.
//
// Failures are counted in the shared limiter (Redis when there are several nodes; while it cannot
// decide, in this node's memory: credential-limiter.ts). Its one operation, `hit`, counts what it
// admits, so a check that must not count is answered from this node's memory: the lock that a
// failure's hit reports (limit reached, or refused) is kept here until the window ends it. Another
// node learns of the lock at its own next failure on that account, whose hit is refused: across
// N nodes, at most N - 1 password checks pass the limit.
import { hash } from 'node:crypto'
import type { Services } from '../services.js'
import { ApiProblem } from '../route.js'
import { credentialHit } from './credential-limiter.js'

const ACCOUNT_FAILURE_LIMIT = 10
const ACCOUNT_WINDOW_MS = 15 * 60_000
/** Locked accounts remembered per node; expired ones are dropped first when it is full. */
const MAX_LOCKS = 100_000

const locksBy = new WeakMap<Services, Map<string, number>>()

function locksOf(s: Services): Map<string, number> {
  let m = locksBy.get(s)
  if (!m) locksBy.set(s, (m = new Map()))
  return m
}

/**
 * The account a sign-in is for: the user when the email matched one (every spelling the
 * database matches is one account), else the lower-cased email. Hashed: no email reaches Redis.
 */
export function accountKey(email: string, userId: string | null): string {
  const id = userId ? `user:${userId}` : `email:${email.toLowerCase()}`
  return `login-account:${hash('sha256', id, 'base64url')}`
}

/** Throws 429 (with Retry-After) while the account is locked. */
export function refuseLockedAccount(s: Services, key: string): void {
  const locks = locksOf(s)
  const until = locks.get(key)
  if (until === undefined) return
  const now = s.now()
  if (until <= now) {
    locks.delete(key)
    return
  }
  throw new ApiProblem('rate-limit', `Too many failed sign-ins for this account; at most ${ACCOUNT_FAILURE_LIMIT} per ${ACCOUNT_WINDOW_MS / 60_000} minutes`, {
    headers: { 'retry-after': String(Math.max(1, Math.ceil((until - now) / 1000))) },
  })
}

/** Counts a failed sign-in; the one that reaches the limit locks the account on this node. */
export async function recordFailedSignIn(s: Services, key: string): Promise<void> {
  // Redis down: counted on this node meanwhile (credential-limiter.ts).
  const d = await credentialHit(s, key, ACCOUNT_FAILURE_LIMIT, ACCOUNT_WINDOW_MS)
  if (d.allowed && d.remaining > 0) return
  const locks = locksOf(s)
  if (locks.size >= MAX_LOCKS) {
    const now = s.now()
    for (const [k, until] of locks) if (until <= now) locks.delete(k)
    if (locks.size >= MAX_LOCKS) locks.delete(locks.keys().next().value!)
  }
  locks.set(key, d.resetAt)
}
