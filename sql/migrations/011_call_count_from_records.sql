-- A routed call no longer updates its session's row. Until now the statement that
-- inserted a batch of call records also locked each session's row and bumped its call_count and
-- last_call_at: at a million live sessions each call is a different session, so that was one
-- row lock and one new version of a wide row per call, about 12 of the ~57 µs of Postgres CPU
-- per recorded call (bench/RESULTS.md).
--
-- contract 2.2 callCount / lastCallAt are now what call_records holds for the session (the index
-- call_records_session (session_id, id) finds them), plus the calls whose records the retention
-- purge deleted (sql/retention.ts folds them into the two columns below as it deletes). Live
-- sessions are counted in memory as before (gateway/call-counter.ts); boot, ended sessions,
-- lists and the inactivity check derive it in SQL (sql/sessions.ts, sql/session-load.ts).
--
-- call_records_session carries initiated_at, so a session's count and last call are one
-- index-only probe (a boot derives them for every live session: at a million sessions with 1.5
-- calls each, ~1.5 s of Postgres time this way, ~5 s with a heap fetch per record).
--
-- call_count and last_call_at stay, unread and no longer written by this version: a node of the
-- previous version still bumps them during a rolling deploy, harmlessly. A later migration drops
-- them.
ALTER TABLE sessions ADD COLUMN purged_calls integer NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN purged_last_call_at timestamptz;

-- Calls counted before this migration whose records are gone (purged): they stay counted.
UPDATE sessions s SET purged_calls = s.call_count - r.n, purged_last_call_at = s.last_call_at
FROM (
  SELECT s2.id, (SELECT count(*) FROM call_records c WHERE c.session_id = s2.id)::int AS n
  FROM sessions s2 WHERE s2.call_count > 0
) r
WHERE s.id = r.id AND s.call_count > r.n;

DROP INDEX call_records_session;
CREATE INDEX call_records_session ON call_records (session_id, id) INCLUDE (initiated_at);
