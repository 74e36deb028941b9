-- The Twilio Proxy v1 façade (docs/twilio-proxy.md): Twilio-shaped credentials of a tenant, and the
-- façade's own resources (Services, their number pools, Sessions, Participants, the interactions
-- it records itself). Ids are uuids; a resource's SID is its prefix and the uuid's 32 hex digits.
-- Participant identifiers are real numbers: stored encrypted (identifier_enc) and hashed under the
-- tenant's salt (identifier_hash), like the parties of a native session.

-- One account per tenant: the AC SID is its Basic user name; the auth token is stored as an HMAC
-- (checked per request) and encrypted (outgoing callbacks are signed with it).
CREATE TABLE twilio_accounts (
  sid         text PRIMARY KEY CHECK (sid ~ '^AC[0-9a-f]{32}$'),
  tenant_id   uuid NOT NULL UNIQUE REFERENCES tenants(id),
  token_mac   bytea NOT NULL,
  token_enc   bytea NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  rotated_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE twilio_services (
  id                          uuid PRIMARY KEY,
  tenant_id                   uuid NOT NULL REFERENCES tenants(id),
  unique_name                 text NOT NULL,
  default_ttl                 integer NOT NULL DEFAULT 0 CHECK (default_ttl >= 0),
  callback_url                text,
  geo_match_level             text NOT NULL DEFAULT 'country',
  number_selection_behavior   text NOT NULL DEFAULT 'prefer-sticky',
  intercept_callback_url      text,
  out_of_session_callback_url text,
  chat_instance_sid           text,
  created_at                  timestamptz NOT NULL,
  updated_at                  timestamptz NOT NULL
);
CREATE UNIQUE INDEX twilio_services_name ON twilio_services (tenant_id, unique_name);
CREATE INDEX twilio_services_list ON twilio_services (tenant_id, created_at, id);

-- A pool number belongs to at most one Service (the primary key: Twilio's 80101).
CREATE TABLE twilio_phone_numbers (
  number       text PRIMARY KEY REFERENCES proxy_numbers(number),
  service_id   uuid NOT NULL REFERENCES twilio_services(id) ON DELETE CASCADE,
  tenant_id    uuid NOT NULL REFERENCES tenants(id),
  is_reserved  boolean NOT NULL DEFAULT false,
  created_at   timestamptz NOT NULL,
  updated_at   timestamptz NOT NULL
);
CREATE INDEX twilio_phone_numbers_list ON twilio_phone_numbers (service_id, created_at, number);

-- expires_at: when the session closes by itself (DateExpiry, else the last interaction + Ttl,
-- within the cap); NULL while open-ended. Written by sql/twilio-proxy-sessions.ts with the row.
CREATE TABLE twilio_sessions (
  id                     uuid PRIMARY KEY,
  service_id             uuid NOT NULL REFERENCES twilio_services(id) ON DELETE CASCADE,
  tenant_id              uuid NOT NULL REFERENCES tenants(id),
  unique_name            text,
  status                 text NOT NULL CHECK (status IN ('open','in-progress','closed','failed','unknown')),
  mode                   text NOT NULL CHECK (mode IN ('message-only','voice-only','voice-and-message')),
  ttl                    integer NOT NULL DEFAULT 0 CHECK (ttl >= 0),
  date_expiry            timestamptz,
  expires_at             timestamptz,
  date_started           timestamptz,
  date_ended             timestamptz,
  date_last_interaction  timestamptz,
  closed_reason          text,
  native_session_id      uuid,
  created_at             timestamptz NOT NULL,
  updated_at             timestamptz NOT NULL
);
CREATE UNIQUE INDEX twilio_sessions_name ON twilio_sessions (service_id, unique_name) WHERE unique_name IS NOT NULL;
CREATE INDEX twilio_sessions_list ON twilio_sessions (service_id, created_at, id);
-- The expiry sweep (every node, every second) and each request's own check.
CREATE INDEX twilio_sessions_due ON twilio_sessions (expires_at) WHERE status IN ('open','in-progress') AND expires_at IS NOT NULL;

-- `active`: the participant is not deleted and its session is open or in progress. The partial
-- unique index is the pair rule: one identifier never holds one proxy number in two active
-- sessions, whatever node or request asks (Twilio's 80623 race cannot happen).
CREATE TABLE twilio_participants (
  id               uuid PRIMARY KEY,
  session_id       uuid NOT NULL REFERENCES twilio_sessions(id) ON DELETE CASCADE,
  service_id       uuid NOT NULL,
  tenant_id        uuid NOT NULL,
  identifier_enc   bytea NOT NULL,
  identifier_hash  text NOT NULL,
  friendly_name    text,
  proxy_number     text NOT NULL,
  active           boolean NOT NULL DEFAULT true,
  date_deleted     timestamptz,
  created_at       timestamptz NOT NULL,
  updated_at       timestamptz NOT NULL
);
CREATE UNIQUE INDEX twilio_participants_pair ON twilio_participants (identifier_hash, proxy_number) WHERE active;
CREATE INDEX twilio_participants_list ON twilio_participants (session_id, created_at, id);
CREATE INDEX twilio_participants_sticky ON twilio_participants (service_id, identifier_hash, created_at DESC);

-- Interactions the façade makes itself (MessageInteractions); never a message body.
CREATE TABLE twilio_interactions (
  id                  uuid PRIMARY KEY,
  session_id          uuid NOT NULL REFERENCES twilio_sessions(id) ON DELETE CASCADE,
  participant_id      uuid NOT NULL,
  type                text NOT NULL,
  outbound_status     text NOT NULL,
  provider_message_id text,
  created_at          timestamptz NOT NULL,
  updated_at          timestamptz NOT NULL
);
CREATE INDEX twilio_interactions_list ON twilio_interactions (session_id, created_at, id);

-- The native sessions a façade session has had (one per opening: its two participants then), so
-- its Interactions include their call and SMS records.
CREATE TABLE twilio_native_sessions (
  native_id                uuid PRIMARY KEY,
  session_id               uuid NOT NULL REFERENCES twilio_sessions(id) ON DELETE CASCADE,
  agent_participant_id     uuid NOT NULL,
  customer_participant_id  uuid NOT NULL
);
CREATE INDEX twilio_native_sessions_session ON twilio_native_sessions (session_id);

-- Call and SMS interactions deleted through the façade: hidden from it, the records stay maskline's.
CREATE TABLE twilio_hidden_interactions (
  id          uuid PRIMARY KEY,
  session_id  uuid NOT NULL REFERENCES twilio_sessions(id) ON DELETE CASCADE
);

-- API keys of the account (Basic `SK…:secret`, the SDK given {accountSid}); the secret as an HMAC only.
CREATE TABLE twilio_api_keys (
  sid          text PRIMARY KEY CHECK (sid ~ '^SK[0-9a-f]{32}$'),
  tenant_id    uuid NOT NULL REFERENCES tenants(id),
  secret_mac   bytea NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  revoked_at   timestamptz
);
CREATE INDEX twilio_api_keys_tenant ON twilio_api_keys (tenant_id);
