-- Dual-proxy sessions and bound numbers (docs/dual-proxy.md).
--
-- sessions.customer_proxy_number: the customer's own proxy when it differs from proxy_number (the
-- agent's); NULL for every session the native API creates. The session's participant rows are
-- (proxy_number, agent_hash) and (COALESCE(customer_proxy_number, proxy_number), customer_hash), so
-- session_participants' primary key keeps the overlap rule per (proxy, party) for both kinds.
--
-- proxy_numbers.bound_tenant_id: the number belongs to that tenant's pool of pinned numbers: only
-- its pinned creates use it, native allocation (any tenant's) never does. The native create's
-- gates refuse a bound number (sql/session-create-sql.ts CREATE, and the batch below), so a node
-- that has not yet heard of a binding cannot win.
ALTER TABLE proxy_numbers ADD COLUMN bound_tenant_id uuid NULL REFERENCES tenants(id);
-- No foreign key on sessions (012: a trigger and a query per create): the pinned create
-- (sql/pinned-create.ts) writes a customer_proxy_number only after locking that proxy_numbers row.
ALTER TABLE sessions ADD COLUMN customer_proxy_number text NULL;

-- create_sessions_batch (migration 015) with its hold gate refusing bound numbers; the function
-- is otherwise unchanged (its text is edited in place, and this fails if the gate is not found).
DO $$
DECLARE
  def text := pg_get_functiondef('create_sessions_batch(jsonb, uuid[], text[])'::regprocedure);
  gate text := 'WHERE pn.number = r.proxy AND (pn.tenant_id IS NULL OR pn.tenant_id = r.tenant)))';
  edited text := replace(def, gate, 'WHERE pn.number = r.proxy AND pn.bound_tenant_id IS NULL AND (pn.tenant_id IS NULL OR pn.tenant_id = r.tenant)))');
BEGIN
  IF edited = def THEN RAISE EXCEPTION 'create_sessions_batch: hold gate not found'; END IF;
  EXECUTE edited;
END
$$;
