-- maskline schema v1. Postgres is the source of truth; the engine rebuilds its memory from it.
-- Real phone numbers are stored only encrypted (AES-256-GCM, *_enc columns); matching uses
-- tenant-salted HMAC hashes (*_hash columns). No column ever holds SMS text (contract 1.6).

CREATE TABLE tenants (
  id                           uuid PRIMARY KEY,
  name                         text NOT NULL,
  tier                         text NOT NULL DEFAULT 'STARTER' CHECK (tier IN ('STARTER','GROWTH','ENTERPRISE')),
  status                       text NOT NULL DEFAULT 'ACTIVE' CHECK (status IN ('ACTIVE','SUSPENDED')),
  salt                         bytea NOT NULL,
  webhook_url                  text,
  default_grace_period         integer NOT NULL DEFAULT 15,
  expired_call_behavior        text NOT NULL DEFAULT 'DEAD_LINE'
                               CHECK (expired_call_behavior IN ('DEAD_LINE','REDIRECT_SUPPORT','PLAY_MESSAGE')),
  support_phone                text,
  recording_enabled            boolean NOT NULL DEFAULT false,
  recording_consent_mode       text NOT NULL DEFAULT 'DEFAULT' CHECK (recording_consent_mode IN ('DEFAULT','CUSTOM','NONE')),
  recording_consent_audio_url  text,
  push_config                  jsonb NOT NULL DEFAULT '{}'::jsonb,
  -- sessions in PENDING/ACTIVE/GRACE_PERIOD; kept in the same transactions that change them so the
  -- concurrent-session quota (contract 8.2) holds across nodes with a single conditional UPDATE.
  live_sessions                integer NOT NULL DEFAULT 0 CHECK (live_sessions >= 0),
  created_at                   timestamptz NOT NULL DEFAULT now(),
  updated_at                   timestamptz NOT NULL DEFAULT now(),
  -- R-REC at the database too.
  CONSTRAINT tenants_r_rec CHECK (NOT (recording_enabled AND recording_consent_mode = 'NONE'))
);
CREATE UNIQUE INDEX tenants_name_key ON tenants (lower(name));

CREATE TABLE users (
  id            uuid PRIMARY KEY,
  tenant_id     uuid NOT NULL REFERENCES tenants(id),
  email         text NOT NULL,
  password_hash text NOT NULL,
  role          text NOT NULL CHECK (role IN ('OWNER','ADMIN','OPERATOR')),
  created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX users_email_key ON users (lower(email));

CREATE TABLE api_credentials (
  id          uuid PRIMARY KEY,
  tenant_id   uuid NOT NULL REFERENCES tenants(id),
  key_hash    bytea NOT NULL UNIQUE,          -- SHA-256 of the apiKey
  secret_mac  bytea NOT NULL,                 -- HMAC-SHA256(server key, apiSecret)
  created_at  timestamptz NOT NULL DEFAULT now(),
  revoked_at  timestamptz
);
CREATE INDEX api_credentials_tenant ON api_credentials (tenant_id) WHERE revoked_at IS NULL;

-- The number pool. tenant_id is the tenant holding the number while it carries live sessions
-- (contract D4: one tenant per proxy in use); released_at starts the cooldown (set when the last
-- live session on it ends, NULL while held). live_sessions counts its PENDING/ACTIVE/GRACE_PERIOD
-- sessions, kept in the same transactions as the sessions themselves.
CREATE TABLE proxy_numbers (
  number       text PRIMARY KEY,
  region       text NOT NULL,
  provider     text NOT NULL DEFAULT 'telnyx',
  tenant_id    uuid REFERENCES tenants(id),
  last_tenant_id uuid REFERENCES tenants(id),
  live_sessions integer NOT NULL DEFAULT 0 CHECK (live_sessions >= 0),
  released_at  timestamptz,
  created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX proxy_numbers_region ON proxy_numbers (region, provider);

CREATE TABLE sessions (
  id                    uuid PRIMARY KEY,
  tenant_id             uuid NOT NULL REFERENCES tenants(id),
  proxy_number          text NOT NULL REFERENCES proxy_numbers(number),
  state                 text NOT NULL CHECK (state IN ('PENDING','ACTIVE','GRACE_PERIOD','EXPIRED','FAILED')),
  direction_mode        text NOT NULL CHECK (direction_mode IN ('BIDIRECTIONAL','A_TO_B_ONLY','B_TO_A_ONLY')),
  metadata              jsonb NOT NULL DEFAULT '{}'::jsonb,
  grace_period_minutes  integer NOT NULL,
  max_duration_minutes  integer NOT NULL,
  recording_enabled     boolean NOT NULL,
  consent_prompt        text NOT NULL CHECK (consent_prompt IN ('DEFAULT','CUSTOM','NONE')),
  agent_phone_enc       bytea NOT NULL,
  customer_phone_enc    bytea NOT NULL,
  agent_hash            text NOT NULL,
  customer_hash         text NOT NULL,
  expires_at            timestamptz NOT NULL,
  created_at            timestamptz NOT NULL,
  activated_at          timestamptz NOT NULL,
  ended_at              timestamptz,
  expired_at            timestamptz,
  call_count            integer NOT NULL DEFAULT 0,
  last_call_at          timestamptz,
  version               integer NOT NULL DEFAULT 1,
  CONSTRAINT sessions_r_rec CHECK (NOT (recording_enabled AND consent_prompt = 'NONE'))
);
CREATE INDEX sessions_tenant_created ON sessions (tenant_id, created_at DESC, id DESC);
CREATE INDEX sessions_tenant_state_created ON sessions (tenant_id, state, created_at DESC, id DESC);
CREATE INDEX sessions_live_expiry ON sessions (expires_at) WHERE state IN ('PENDING','ACTIVE','GRACE_PERIOD');
-- Boot reads every live session keyset-paginated by id (sql/sessions.ts loadLiveSessions).
CREATE INDEX sessions_live_id ON sessions (id) WHERE state IN ('PENDING','ACTIVE','GRACE_PERIOD');
CREATE INDEX sessions_agent_hash ON sessions (tenant_id, agent_hash) WHERE state IN ('PENDING','ACTIVE','GRACE_PERIOD');
CREATE INDEX sessions_customer_hash ON sessions (tenant_id, customer_hash) WHERE state IN ('PENDING','ACTIVE','GRACE_PERIOD');

-- One row per party of a live session. The primary key IS the participant-overlap rule (contract 3.1):
-- the database refuses two live sessions sharing a participant on one proxy, whatever node asks.
-- Rows are deleted in the transaction that ends the session's life (expiry) or unwires a party (swap).
-- No foreign keys on purpose: rows are written only by sql/sessions.ts in the transaction that
-- writes their session (whose own keys already check tenant and proxy), and per-row key checks
-- on this, the hottest table (two rows per session), doubled the cost of every session insert.
CREATE TABLE session_participants (
  proxy_number  text NOT NULL,
  party_hash    text NOT NULL,
  session_id    uuid NOT NULL,
  PRIMARY KEY (proxy_number, party_hash)
);
CREATE INDEX session_participants_session ON session_participants (session_id);

CREATE TABLE call_records (
  id                        uuid PRIMARY KEY,
  session_id                uuid NOT NULL REFERENCES sessions(id),
  tenant_id                 uuid NOT NULL REFERENCES tenants(id),
  provider_call_id          text NOT NULL UNIQUE,      -- CallSid: replayed callbacks change nothing twice
  status                    text NOT NULL CHECK (status IN ('RINGING','ANSWERED','COMPLETED','MISSED','FAILED')),
  direction                 text NOT NULL CHECK (direction IN ('A_TO_B','B_TO_A')),
  duration_seconds          integer NOT NULL DEFAULT 0,
  initiated_at              timestamptz NOT NULL,
  answered_at               timestamptz,
  ended_at                  timestamptz,
  recording_url             text,
  recording_duration_seconds integer,
  recording_consent_played  boolean NOT NULL DEFAULT false,
  party_b_hash              text NOT NULL
);
CREATE INDEX call_records_session ON call_records (session_id, id);
CREATE INDEX call_records_tenant_id ON call_records (tenant_id, id);
CREATE INDEX call_records_tenant_initiated ON call_records (tenant_id, initiated_at);
CREATE INDEX call_records_initiated ON call_records (initiated_at);      -- retention purge (contract 8.7)

-- Metadata only: there is deliberately no column for the message text (contract 1.6, 2.4).
CREATE TABLE sms_records (
  id                    uuid PRIMARY KEY,
  session_id            uuid NOT NULL REFERENCES sessions(id),
  tenant_id             uuid NOT NULL REFERENCES tenants(id),
  provider_message_id   text NOT NULL UNIQUE,          -- inbound message id: idempotency key
  forward_message_id    text UNIQUE,                   -- id of the forwarded message at the provider
  direction             text NOT NULL CHECK (direction IN ('A_TO_B','B_TO_A')),
  status                text NOT NULL CHECK (status IN ('QUEUED','SENT','DELIVERED','FAILED')),
  sent_at               timestamptz NOT NULL,
  delivered_at          timestamptz
);
CREATE INDEX sms_records_session_sent ON sms_records (session_id, sent_at DESC, id DESC);
CREATE INDEX sms_records_sent ON sms_records (sent_at);                 -- retention purge (contract 8.7)

CREATE TABLE billing_periods (
  id            uuid PRIMARY KEY,
  tenant_id     uuid NOT NULL REFERENCES tenants(id),
  period_start  timestamptz NOT NULL,
  period_end    timestamptz NOT NULL,
  status        text NOT NULL DEFAULT 'ACTIVE' CHECK (status IN ('ACTIVE','CLOSED')),
  created_at    timestamptz NOT NULL DEFAULT now(),
  closed_at     timestamptz,
  UNIQUE (tenant_id, period_start)
);
-- contract D7: one ACTIVE period per tenant.
CREATE UNIQUE INDEX billing_periods_one_active ON billing_periods (tenant_id) WHERE status = 'ACTIVE';

CREATE TABLE pricing (
  id                 uuid PRIMARY KEY,
  tier               text NOT NULL CHECK (tier IN ('STARTER','GROWTH','ENTERPRISE')),
  metric             text NOT NULL CHECK (metric IN ('session_created','call_minute','sms_sent','sms_received','recording_minute','number_rental')),
  unit_price         numeric(12,6) NOT NULL,
  included_quantity  numeric(14,3) NOT NULL,
  overage_price      numeric(12,6) NOT NULL,
  currency           text NOT NULL DEFAULT 'USD',
  effective_from     timestamptz NOT NULL,
  effective_until    timestamptz
);
CREATE UNIQUE INDEX pricing_current ON pricing (tier, metric) WHERE effective_until IS NULL;

CREATE TABLE billing_events (
  id                 uuid PRIMARY KEY,
  tenant_id          uuid NOT NULL REFERENCES tenants(id),
  billing_period_id  uuid NOT NULL REFERENCES billing_periods(id),
  metric             text NOT NULL CHECK (metric IN ('session_created','call_minute','sms_sent','sms_received','recording_minute','number_rental')),
  quantity           numeric(14,3) NOT NULL,
  unit_price         numeric(12,6),
  recorded_at        timestamptz NOT NULL,
  session_id         uuid,
  call_record_id     uuid,
  metadata           jsonb NOT NULL DEFAULT '{}'::jsonb,
  -- e.g. 'call_minute:<callId>': a replayed callback never bills twice
  dedupe_key         text UNIQUE
);
CREATE INDEX billing_events_tenant_time ON billing_events (tenant_id, recorded_at, id);

CREATE TABLE webhook_configs (
  tenant_id    uuid PRIMARY KEY REFERENCES tenants(id),
  url          text NOT NULL,
  events       text[] NOT NULL,
  secret_enc   bytea NOT NULL,                 -- whsec_ secret, encrypted (needed to sign)
  updated_at   timestamptz NOT NULL DEFAULT now()
);

-- Durable outbox: written in the same transaction as the change that causes the event.
CREATE TABLE outbox (
  id               uuid PRIMARY KEY,           -- the event id (envelope id)
  tenant_id        uuid NOT NULL REFERENCES tenants(id),
  session_id       uuid,
  type             text NOT NULL,
  envelope         jsonb NOT NULL,             -- {id, type, createdAt, data}: never a phone number
  created_at       timestamptz NOT NULL DEFAULT now(),
  attempts         integer NOT NULL DEFAULT 0,
  next_attempt_at  timestamptz NOT NULL DEFAULT now(),
  locked_until     timestamptz,
  done_at          timestamptz,                -- delivered, skipped (no subscriber) or given up
  outcome          text CHECK (outcome IN ('delivered','skipped','failed'))
);
CREATE INDEX outbox_due ON outbox (next_attempt_at, id) WHERE done_at IS NULL;
CREATE INDEX outbox_session ON outbox (session_id, id) WHERE done_at IS NULL;

CREATE TABLE webhook_deliveries (
  id             uuid PRIMARY KEY,
  tenant_id      uuid NOT NULL REFERENCES tenants(id),
  event_id       uuid NOT NULL,
  event          text NOT NULL,
  url            text NOT NULL,
  status_code    integer NOT NULL DEFAULT 0,
  success        boolean NOT NULL,
  attempt_count  integer NOT NULL,
  error          text,
  requested_at   timestamptz NOT NULL,
  completed_at   timestamptz NOT NULL
);
CREATE INDEX webhook_deliveries_tenant ON webhook_deliveries (tenant_id, requested_at DESC, id DESC);

CREATE TABLE audit_log (
  id          uuid PRIMARY KEY,
  tenant_id   uuid NOT NULL REFERENCES tenants(id),
  action      text NOT NULL,
  target_id   uuid,
  data        jsonb NOT NULL DEFAULT '{}'::jsonb,   -- hashes only, never numbers
  created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX audit_log_tenant ON audit_log (tenant_id, created_at);

CREATE TABLE device_tokens (
  token          text PRIMARY KEY,
  tenant_id      uuid NOT NULL REFERENCES tenants(id),
  user_hash      text NOT NULL,
  platform       text NOT NULL CHECK (platform IN ('ios','android')),
  app_bundle_id  text,
  active         boolean NOT NULL DEFAULT true,
  created_at     timestamptz NOT NULL DEFAULT now(),
  updated_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX device_tokens_user ON device_tokens (tenant_id, user_hash) WHERE active;

CREATE TABLE device_presence (
  tenant_id  uuid NOT NULL REFERENCES tenants(id),
  user_hash  text NOT NULL,
  status     text NOT NULL CHECK (status IN ('online','background','offline')),
  platform   text NOT NULL CHECK (platform IN ('ios','android')),
  ts         bigint NOT NULL,
  PRIMARY KEY (tenant_id, user_hash)
);

CREATE TABLE idempotency_keys (
  tenant_id     uuid NOT NULL REFERENCES tenants(id),
  key           text NOT NULL,
  request_hash  text NOT NULL,
  status_code   integer NOT NULL,
  response      jsonb NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant_id, key)
);
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);  -- 24 h expiry (contract D4)
