// contract 2.2 callCount / lastCallAt as Postgres knows them (migration 011): a session's call records
// (call_records_session (session_id, id) finds them) plus the calls whose records the retention
// purge deleted (sessions.purged_calls / purged_last_call_at). No statement on the voice path
// touches the session's row any more. Live sessions are counted in memory
// (api/app/call-counter.ts); these serve boot, reloads, ended sessions, lists and the
// inactivity check.
import { sql, type FragmentSqlToken } from 'slonik'

const SESSIONS = sql.fragment`sessions`

/** The time of the last call of the sessions row `s` (null: none), as a scalar (for a WHERE clause). */
export function lastCallAt(s: FragmentSqlToken = SESSIONS): FragmentSqlToken {
  return sql.fragment`GREATEST(${s}.purged_last_call_at, (SELECT max(c.initiated_at) FROM call_records c WHERE c.session_id = ${s}.id))`
}

/**
 * `… FROM sessions ${callsJoin()}` puts `calls.call_count` (int4) and `calls.last_call_at` beside
 * each row, one index-only probe of call_records_session per row: every read of the counters
 * (session views and lists, reloads, the boot) goes through it.
 */
export function callsJoin(s: FragmentSqlToken = SESSIONS): FragmentSqlToken {
  return sql.fragment`CROSS JOIN LATERAL (
    SELECT ${s}.purged_calls + count(*)::int AS call_count, GREATEST(${s}.purged_last_call_at, max(c.initiated_at)) AS last_call_at
    FROM call_records c WHERE c.session_id = ${s}.id) calls`
}
