// What the session store's parts share (sql/sessions.ts is their index).
import { sql, type DatabasePool } from 'slonik'
import { LIVE_STATES, type SessionState } from '../engine/types.js'
import type { Db } from './transaction.js'

export const LIVE = sql.fragment`('PENDING','ACTIVE','GRACE_PERIOD')`
export const isLive = (s: SessionState) => LIVE_STATES.includes(s)

export function isPool(db: Db): db is DatabasePool {
  return typeof (db as DatabasePool).connect === 'function'
}
