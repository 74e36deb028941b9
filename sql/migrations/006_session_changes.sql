-- docs/scaling.md: every node reconciles its memory with Postgres by reading the sessions changed since
-- its last sweep (gateway/reconcile.ts): after a Redis reconnect, when the bus stream shows a gap,
-- and every 30 s. The change marker is the id of the transaction that wrote the row's current
-- version (xid8), not a time or a sequence value:
-- - a marker stamped while the row is written (clock_timestamp(), nextval()) is not in commit
--   order: a transaction stamped at 10:00:00.000 that commits at 10:00:00.050 is invisible to a
--   sweep at 10:00:00.020 that then remembers "everything up to 10:00:00.020 seen", and is missed
--   for good (a time watermark needs an overlap window as long as the longest transaction, 60 s
--   here, re-read on every sweep);
-- - a transaction id has an exact watermark instead: pg_snapshot_xmin(pg_current_snapshot()) is
--   the oldest transaction still running when the sweep reads, so every transaction below it has
--   finished and its rows are in what that read sees. The next sweep reads `change_xid >= that
--   xmin`: nothing committed later is missed, nothing older is read again. A long write
--   transaction elsewhere only widens the next window (more rows compared, never fewer).
-- The marker moves only when the version does (a trigger with a WHEN clause): the call_count bump
-- of every routed call (sql/record-writer.ts) leaves it alone, so that update stays HOT (003).
-- Rows written before this migration have no marker; the boot load reads them anyway.
ALTER TABLE sessions ADD COLUMN change_xid xid8;

-- Set after ADD COLUMN: a volatile default given there would rewrite the whole table.
ALTER TABLE sessions ALTER COLUMN change_xid SET DEFAULT pg_current_xact_id();

CREATE FUNCTION sessions_mark_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  NEW.change_xid := pg_current_xact_id();
  RETURN NEW;
END
$$;

-- Every write path that changes a session bumps its version (createSession inserts version 1,
-- updateSession writes next.version, expireSessions version + 1): none has to know about this.
CREATE TRIGGER sessions_change_xid BEFORE UPDATE ON sessions
  FOR EACH ROW WHEN (OLD.version IS DISTINCT FROM NEW.version) EXECUTE FUNCTION sessions_mark_change();

CREATE INDEX sessions_change_xid ON sessions (change_xid) WHERE change_xid IS NOT NULL;
