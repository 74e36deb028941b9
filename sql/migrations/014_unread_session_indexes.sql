-- Two indexes of sessions that no query reads any more, dropped.
--
-- - sessions_live_id (id) of live sessions was the boot's keyset pagination; the boot has read the
--   table in page ranges with COPY since the tenth session (sql/session-load.ts liveSelect), and
--   every other read by id goes through sessions_pkey.
-- - sessions_live_expiry (expires_at) of live sessions: expiry is decided in memory (the engine's
--   expiry heap) and written by id (sql/sessions.ts expireSessions); no statement filters or
--   orders sessions by expires_at.
-- Both were written by every session create and by every update that moves a session's state,
-- expiry or customer (a swap's update is not HOT: its customer hash is indexed). A partial index
-- also costs each writing statement the set-up of its predicate. Measured with
-- `npm run bench -- --only create --sessions 100000` (real Postgres, A/B/A/B on one machine):
-- Postgres CPU per create 451, 492, 415, 420 µs before, 387, 472, 354, 394 µs after.
-- test/sql/migrate.test.ts names the reader of every index sessions keeps.
DROP INDEX IF EXISTS sessions_live_id;
DROP INDEX IF EXISTS sessions_live_expiry;
