-- Less Postgres work per session create (POST /v1/sessions is one statement,
-- sql/sessions.ts CREATE). Measured with EXPLAIN (ANALYZE) of that statement and the Postgres CPU
-- per create (bench/RESULTS.md).
--
-- 1. No foreign keys on sessions and billing_events, as 005 and 010 did for the records and the
--    outbox. Each key cost a row trigger, a query and a FOR KEY SHARE lock per row (two keys per
--    session, two per usage row, two usage rows per create). The rows are only ever written for
--    parents that exist:
--    - sessions: by CREATE, whose tenant row update (q) and proxy row update (p) gate the insert
--      (no tenant row, no session; the proxy number comes from p's RETURNING, NULL without it,
--      and NOT NULL refuses that), and by sql/bulk-sessions.ts, which checks both itself;
--    - billing_events: by CREATE and sql/billing.ts usageCtes / recordUsage, each taking the
--      billing period's id from billing_periods in the same statement (and with it its tenant).
--    Parents are never deleted: nothing deletes tenants, proxy numbers or billing periods (the
--    retention purge, sql/retention.ts, deletes call_records, sms_records and idempotency_keys).
ALTER TABLE sessions DROP CONSTRAINT IF EXISTS sessions_tenant_id_fkey;
ALTER TABLE sessions DROP CONSTRAINT IF EXISTS sessions_proxy_number_fkey;
ALTER TABLE billing_events DROP CONSTRAINT IF EXISTS billing_events_tenant_id_fkey;
ALTER TABLE billing_events DROP CONSTRAINT IF EXISTS billing_events_billing_period_id_fkey;

-- 2. One random-keyed index fewer per create and per target swap: sessions_customer_hash
--    (tenant_id, customer_hash) of live sessions duplicates the lead of sessions_pair_recent
--    (customer_hash, agent_hash, created_at), 008, whose customer hash (salted per tenant) already
--    separates tenants. GET /v1/sessions/verify on a miss in memory (several nodes) finds a
--    customer's sessions through it: a customer's sessions, ended ones included, are few.
DROP INDEX IF EXISTS sessions_customer_hash;
