-- contract D10: optional session settings, additive (every existing row keeps today's
-- behaviour through the defaults).
--
-- channels: which channels a session carries, as bits (1 voice, 2 sms; 3, both, by default), the
-- way the engine holds them (engine/live-session.ts flags): a smallint, not a text[] of names,
-- so the boot's binary COPY reads two bytes per session and no array.
-- inactivity_timeout_minutes: an ACTIVE session with no call or SMS for this long ends as POST
-- /end would (grace applies); NULL: never.
-- activity_at: where the inactivity clock starts besides the session's calls (last_call_at) and
-- SMS (sms_records.sent_at): the PATCH that set the timeout; NULL: created_at. The ending node
-- reads the three in the statement that ends the session, so activity seen by another node counts.
-- Constant defaults: ADD COLUMN changes the catalog only, no table rewrite.
ALTER TABLE sessions ADD COLUMN channels smallint NOT NULL DEFAULT 3 CHECK (channels BETWEEN 1 AND 3);
ALTER TABLE sessions ADD COLUMN inactivity_timeout_minutes integer CHECK (inactivity_timeout_minutes BETWEEN 1 AND 10080);
ALTER TABLE sessions ADD COLUMN activity_at timestamptz;

-- stickyProxy (item 2): the proxy a tenant's agent and customer had most recently, within 30
-- days, in one index probe (sql/sessions.ts findStickyProxy). Keyed by the customer's hash first
-- (per-tenant salted, so it also separates tenants), then the agent's; newest first. Only
-- creates with stickyProxy read it.
CREATE INDEX sessions_pair_recent ON sessions (customer_hash, agent_hash, created_at DESC);
