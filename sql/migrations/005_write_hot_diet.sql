-- Less Postgres work per recorded call. Every routed call inserts a call_records row and
-- its outbox row (sql/record-apply.ts); every inbound SMS an sms_records row and its outbox rows.
-- Measured with bench/pg-call-insert.bench.ts (Postgres backend CPU per call row with its outbox
-- row, schema before and after this file).
--
-- 1. No foreign keys on call_records and sms_records. A key is checked by a row trigger per
--    inserted row (a query of its own, and a FOR KEY SHARE lock on the parent row). These rows are
--    only ever written for sessions and tenants that exist: they are inserted only by
--    sql/record-apply.ts, for a session the engine routed to, which was committed before the
--    engine knew it (sql/sessions.ts createSession). The insert itself still checks the session,
--    and that the row's tenant is the session's, in one join per statement, and refuses a row for
--    an unknown one with the SQLSTATE 23503 the keys raised (refuse_record_without_session below),
--    so a bad row still fails alone in the writer's retry.
--    Parents are never deleted: nothing deletes tenants or sessions, and the retention purge
--    (sql/retention.ts) deletes only call_records, sms_records and idempotency_keys, the children.
--
--    outbox keeps its key to tenants for now. Without it (a further ~7 µs per call in the bench)
--    test/sql/lock-order.test.ts saw Postgres deadlocks, 3 runs in 9 under parallel load against
--    none in 12 with the key: the server log shows releaseSessions (sql/sessions.ts) of a session
--    end and of an expiry sweep each waiting for the other on one tenants row, the lock_t/t pair
--    of that statement meeting a row updated since its snapshot. The key's check in
--    updateSession's outbox insert locks that row earlier, which hides it; dropping the key waits
--    for that statement's lock order to be fixed (not a file of this change).
ALTER TABLE call_records DROP CONSTRAINT IF EXISTS call_records_session_id_fkey;
ALTER TABLE call_records DROP CONSTRAINT IF EXISTS call_records_tenant_id_fkey;
ALTER TABLE sms_records DROP CONSTRAINT IF EXISTS sms_records_session_id_fkey;
ALTER TABLE sms_records DROP CONSTRAINT IF EXISTS sms_records_tenant_id_fkey;

-- Called by the record inserts for a row whose session (of that tenant) does not exist: refuses
-- the statement as the foreign key did. Only the ids are named (never a number).
CREATE FUNCTION refuse_record_without_session(tbl text, session_id uuid) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'insert into % refused: no session % of this tenant', tbl, session_id
    USING ERRCODE = 'foreign_key_violation';
END
$$;

-- 2. One time index fewer on call_records. The retention purge (contract 8.7) walks
--    call_records_tenant_initiated one tenant at a time instead of a global (initiated_at) index.
--
--    The other time indexes stay, because a time bound is not an id bound here: a call's id is
--    minted by uuidv7(now) (gateway/telephony.ts) and its initiated_at is that same `now`, but
--    api/ids.ts keeps ids monotonic per process: asked for a millisecond earlier than the last one
--    it minted (a clock stepped back, or a test clock behind the wall clock while other ids are
--    minted at Date.now()), it returns an id of that later millisecond. So an id's time is >=
--    initiated_at, not equal to it, and `id < uuidv7 bound of periodEnd` would drop calls at the
--    end of a period. Analytics and GET /v1/calls filter on initiated_at, so
--    call_records_tenant_initiated (tenant_id, initiated_at) stays for them; sms_records_sent
--    stays for the SMS purge (SMS ids are minted the same way, and sms_records has no tenant
--    index to walk per tenant).
DROP INDEX IF EXISTS call_records_initiated;
