-- contract D11: SMS opt-out (carrier rules for US long codes). A party who texts STOP to a
-- proxy is opted out of messages from that proxy, across sessions (proxies are reused), until it
-- texts START. Stored by tenant, proxy and party hash, never the party's number (contract D2).
-- START keeps the row (opted_out = false) instead of deleting it, so the change is seen by the
-- other nodes' reconciliation sweep like any other (a deleted row leaves nothing to read).
-- change_xid: the transaction that wrote the row's current state, for the sweep's exact
-- watermark (the same scheme as sessions, 006_session_changes.sql). Every write sets it.
CREATE TABLE sms_opt_outs (
  tenant_id        uuid NOT NULL REFERENCES tenants(id),
  proxy            text NOT NULL,
  party_hash       text NOT NULL,
  opted_out        boolean NOT NULL,
  -- The STOP message that opted the party out, and when its one confirmation was handed to the
  -- provider: a provider retry of that message (same id) whose confirmation was not sent yet
  -- sends it; any other STOP while opted out sends none.
  stop_message_id  text,
  confirmed_at     timestamptz,
  updated_at       timestamptz NOT NULL DEFAULT now(),
  change_xid       xid8 NOT NULL DEFAULT pg_current_xact_id(),
  PRIMARY KEY (tenant_id, proxy, party_hash)
);
CREATE INDEX sms_opt_outs_change_xid ON sms_opt_outs (change_xid);

-- Why a message was FAILED without reaching the provider: opted_out (this item) or channel (the
-- session carries voice only, item 4). NULL for every other record.
ALTER TABLE sms_records ADD COLUMN reason text CHECK (reason IN ('opted_out', 'channel'));

-- Tenant texts sent back from the proxy: the STOP confirmation and the HELP answer. NULL: the
-- service's default text.
ALTER TABLE tenants ADD COLUMN sms_opt_out_text text;
ALTER TABLE tenants ADD COLUMN sms_help_text text;
