-- The single-column rules of the tables every session create writes become domains.
--
-- Postgres turns a table's CHECK constraints into executable expressions once per statement that
-- inserts or updates the table (ExecRelCheck: stringToNode of the stored text, expression_planner,
-- ExecInitExpr — for every constraint of the table, whichever columns the statement touches). A
-- session create (sql/sessions.ts CREATE) is one statement that updates tenants (6 constraints)
-- and proxy_numbers (1) and inserts into sessions (6), billing_events (1) and the outbox (1): 15
-- constraints rebuilt per create, about a sixth of its Postgres CPU (perf of the backends under
-- `npm run bench -- --only create --sessions 100000`: ExecConstraints ~9 % of their samples, half
-- of it in the parser). A domain's constraints are planned once and kept in the type cache, and
-- checked only where a statement assigns a value of that type: the create's counter updates of
-- tenants and proxy_numbers no longer look at the tenant's tier or status at all.
-- Measured (same bench, real Postgres, 100k sessions): Postgres CPU per create 400-420 µs before,
-- 365-373 µs after (338 µs with every CHECK dropped, which we do not do: the rules stay enforced).
--
-- The values allowed are exactly the CHECKs' (001, 008); a violation is still SQLSTATE 23514
-- (check_violation, problem `validation`, sql/errors.ts). Clients see the base types: Postgres
-- describes a domain column by its base type on the wire. The two-column rules (tenants_r_rec,
-- sessions_r_rec) stay table CHECKs. Changing a column's type to a domain with a constraint
-- rewrites the table and its indexes once (a few seconds per million sessions).
CREATE DOMAIN tenant_tier AS text CHECK (VALUE IN ('STARTER','GROWTH','ENTERPRISE'));
CREATE DOMAIN tenant_status AS text CHECK (VALUE IN ('ACTIVE','SUSPENDED'));
CREATE DOMAIN expired_call_action AS text CHECK (VALUE IN ('DEAD_LINE','REDIRECT_SUPPORT','PLAY_MESSAGE'));
CREATE DOMAIN consent_mode AS text CHECK (VALUE IN ('DEFAULT','CUSTOM','NONE'));
CREATE DOMAIN live_count AS integer CHECK (VALUE >= 0);
CREATE DOMAIN session_state AS text CHECK (VALUE IN ('PENDING','ACTIVE','GRACE_PERIOD','EXPIRED','FAILED'));
CREATE DOMAIN session_direction AS text CHECK (VALUE IN ('BIDIRECTIONAL','A_TO_B_ONLY','B_TO_A_ONLY'));
CREATE DOMAIN session_channels AS smallint CHECK (VALUE BETWEEN 1 AND 3);
CREATE DOMAIN inactivity_minutes AS integer CHECK (VALUE BETWEEN 1 AND 10080);
CREATE DOMAIN usage_metric AS text CHECK (VALUE IN ('session_created','call_minute','sms_sent','sms_received','recording_minute','number_rental'));
CREATE DOMAIN outbox_outcome AS text CHECK (VALUE IN ('delivered','skipped','failed'));

ALTER TABLE tenants
  DROP CONSTRAINT tenants_tier_check,
  DROP CONSTRAINT tenants_status_check,
  DROP CONSTRAINT tenants_expired_call_behavior_check,
  DROP CONSTRAINT tenants_recording_consent_mode_check,
  DROP CONSTRAINT tenants_live_sessions_check,
  ALTER COLUMN tier TYPE tenant_tier,
  ALTER COLUMN status TYPE tenant_status,
  ALTER COLUMN expired_call_behavior TYPE expired_call_action,
  ALTER COLUMN recording_consent_mode TYPE consent_mode,
  ALTER COLUMN live_sessions TYPE live_count;

ALTER TABLE proxy_numbers
  DROP CONSTRAINT proxy_numbers_live_sessions_check,
  ALTER COLUMN live_sessions TYPE live_count;

ALTER TABLE sessions
  DROP CONSTRAINT sessions_state_check,
  DROP CONSTRAINT sessions_direction_mode_check,
  DROP CONSTRAINT sessions_consent_prompt_check,
  DROP CONSTRAINT sessions_channels_check,
  DROP CONSTRAINT sessions_inactivity_timeout_minutes_check,
  ALTER COLUMN state TYPE session_state,
  ALTER COLUMN direction_mode TYPE session_direction,
  ALTER COLUMN consent_prompt TYPE consent_mode,
  ALTER COLUMN channels TYPE session_channels,
  ALTER COLUMN inactivity_timeout_minutes TYPE inactivity_minutes;

ALTER TABLE billing_events
  DROP CONSTRAINT billing_events_metric_check,
  ALTER COLUMN metric TYPE usage_metric;

ALTER TABLE outbox
  DROP CONSTRAINT outbox_outcome_check,
  ALTER COLUMN outcome TYPE outbox_outcome;
