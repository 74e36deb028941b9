-- The identity of this database, written once by the first node that boots on it. Each node's
-- local write-behind journal (sql/journal.ts) is stamped with it, so a journal is only ever
-- replayed into the database it was written for (a DATA_DIR reused against another
-- DATABASE_URL replays nothing).
CREATE TABLE instance (
  id          uuid PRIMARY KEY,
  singleton   boolean NOT NULL DEFAULT true UNIQUE CHECK (singleton),
  created_at  timestamptz NOT NULL DEFAULT now()
);
