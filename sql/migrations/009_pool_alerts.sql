-- contract D12: pool alerts and refused creates.
-- pool_alert_levels: the cluster's alert level of each region (0 ok, 1 below 20 % free, 2 below
-- 10 %, 3 below 5 %). Every node computes crossings from its own memory of the pool (the same on
-- every node, through the bus); the node whose conditional update moves this row is the one that
-- logs and emits the alert, so a crossing is announced once whichever nodes see it.
CREATE TABLE pool_alert_levels (
  region      text PRIMARY KEY,
  level       smallint NOT NULL CHECK (level BETWEEN 0 AND 3),
  changed_at  timestamptz NOT NULL DEFAULT now()
);

-- Creates refused with 503 pool-exhausted, per tenant and UTC hour: the session analytics report
-- them beside the sessions created (GET /v1/analytics/sessions-over-time). No number is stored.
CREATE TABLE pool_refusals (
  tenant_id  uuid NOT NULL REFERENCES tenants(id),
  hour       timestamptz NOT NULL,
  count      integer NOT NULL CHECK (count > 0),
  PRIMARY KEY (tenant_id, hour)
);
