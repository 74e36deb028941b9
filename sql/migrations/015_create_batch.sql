-- Session creates written in batches (sql/sessions.ts createSessionsBatch,
-- sql/create-batcher.ts). A create's Postgres CPU is a fixed share (statement, executor start-up,
-- commit) plus its rows; a batch pays the fixed share once (bench/pg-create.bench.ts --batch: at
-- 200,000 sessions, 1,140 µs per create alone, 500 in fours, 300 in batches of 32).
--
-- A function, so that the batch is one round trip and still two statements:
-- 1. the batch's tenant rows locked by id, then its proxy rows by number: the order every statement
--    that moves these counters keeps (releaseSessions, bulkInsertSessions, a create alone), so
--    batches, creates and expiry sweeps of any node cannot deadlock;
-- 2. the writes, with a snapshot taken once those rows are held (in one statement, an UPDATE of a
--    row locked by that same statement but changed after its snapshot queues behind its own
--    lock's waiters: sql/sessions.ts, releaseSessions).
-- All or nothing. The gates of CREATE (sql/sessions.ts) for every create: no participant already on
-- its proxy, every proxy free or its tenant's, every month's period open; when one refuses, nothing
-- is written and the answer is 'refused'. Each tenant's quota for all its creates at once (q), each
-- proxy's hold for all its creates at once (p), each Idempotency-Key's claim (claims): when one
-- refuses, a session row gets a NULL tenant or proxy and the call fails as a whole (23502), as on a
-- participant clash inside the batch (23505) or one key twice in it (21000). The caller then runs
-- each create alone, which gives each its exact answer (a key's replay included).
--
-- `batch` is a JSON array of creates, each with the parameters of CREATE by name (sql/sessions.ts
-- createParams) and its Idempotency-Key if any. The outbox rows are written as sql/outbox.ts
-- outboxInsertFrom writes them (test/sql/create-batch.test.ts compares every row a batch writes
-- with what the same creates write one by one, with and without a webhook).
CREATE FUNCTION create_sessions_batch(batch jsonb, tenant_ids uuid[], proxy_list text[]) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  verdict text;
BEGIN
  PERFORM 1 FROM tenants WHERE id = ANY(tenant_ids) ORDER BY id FOR NO KEY UPDATE;
  PERFORM 1 FROM proxy_numbers WHERE number = ANY(proxy_list) ORDER BY number FOR NO KEY UPDATE;
  WITH r AS (
    SELECT * FROM jsonb_to_recordset(batch) AS r(
      id uuid, tenant uuid, quota int, proxy text, state text, direction text, metadata jsonb, grace int, "maxDuration" int,
      recording boolean, consent text, "agentEnc" text, "customerEnc" text, "agentHash" text, "customerHash" text,
      "expiresAt" timestamptz, "createdAt" timestamptz, "activatedAt" timestamptz, "endedAt" timestamptz,
      "expiredAt" timestamptz, version int, events jsonb, "periodStart" timestamptz, "usageId" uuid, "rentalId" uuid,
      "rentalKey" text, "rentalMeta" jsonb, channels smallint, idle int, "priceKnown" boolean, price numeric,
      "idemKey" text, "idemHash" text, "idemStatus" int, "idemResponse" jsonb)),
  go AS (
    SELECT 1 WHERE NOT EXISTS (
        SELECT 1 FROM r JOIN session_participants sp
          ON sp.proxy_number = r.proxy AND sp.party_hash IN (r."agentHash", r."customerHash"))
      AND NOT EXISTS (
        SELECT 1 FROM r WHERE NOT EXISTS (
          SELECT 1 FROM proxy_numbers pn WHERE pn.number = r.proxy AND (pn.tenant_id IS NULL OR pn.tenant_id = r.tenant)))
      AND NOT EXISTS (
        SELECT 1 FROM r WHERE NOT EXISTS (
          SELECT 1 FROM billing_periods bp WHERE bp.tenant_id = r.tenant AND bp.period_start = r."periodStart"))),
  -- Idempotency-Keys (contract D4): claimed as a create alone claims its key; a key used in the
  -- last 24 h is not claimed, and its create's session row then gets a NULL tenant (see s).
  claims AS (
    INSERT INTO idempotency_keys (tenant_id, key, request_hash, status_code, response, created_at)
    SELECT r.tenant, r."idemKey", r."idemHash", r."idemStatus", r."idemResponse", now()
    FROM r WHERE r."idemKey" IS NOT NULL AND EXISTS (SELECT 1 FROM go)
    ON CONFLICT (tenant_id, key) DO UPDATE
      SET request_hash = EXCLUDED.request_hash, status_code = EXCLUDED.status_code,
          response = EXCLUDED.response, created_at = EXCLUDED.created_at
      WHERE idempotency_keys.created_at < now() - interval '24 hours'
    RETURNING tenant_id, key),
  q AS (
    UPDATE tenants t SET live_sessions = t.live_sessions + n.n
    FROM (SELECT r.tenant, count(*)::int AS n, min(r.quota) AS quota FROM r GROUP BY r.tenant) n
    WHERE t.id = n.tenant AND t.live_sessions + n.n <= n.quota AND EXISTS (SELECT 1 FROM go)
    RETURNING t.id),
  p AS (
    UPDATE proxy_numbers pn
    SET tenant_id = n.tenant, last_tenant_id = n.tenant, live_sessions = pn.live_sessions + n.n, released_at = NULL
    FROM (SELECT r.proxy, r.tenant, count(*)::int AS n FROM r GROUP BY r.proxy, r.tenant) n
    WHERE pn.number = n.proxy AND (pn.tenant_id IS NULL OR pn.tenant_id = n.tenant) AND n.tenant IN (SELECT q.id FROM q)
    RETURNING pn.number, pn.tenant_id),
  s AS (
    INSERT INTO sessions (id, tenant_id, proxy_number, state, direction_mode, metadata, grace_period_minutes,
                          max_duration_minutes, recording_enabled, consent_prompt, agent_phone_enc, customer_phone_enc,
                          agent_hash, customer_hash, expires_at, created_at, activated_at, ended_at, expired_at, version,
                          channels, inactivity_timeout_minutes)
    SELECT r.id,
           (SELECT q.id FROM q WHERE q.id = r.tenant
              AND (r."idemKey" IS NULL OR EXISTS (SELECT 1 FROM claims c WHERE c.tenant_id = r.tenant AND c.key = r."idemKey"))),
           (SELECT p.number FROM p WHERE p.number = r.proxy AND p.tenant_id = r.tenant),
           r.state, r.direction, r.metadata, r.grace, r."maxDuration", r.recording, r.consent,
           decode(r."agentEnc", 'hex'), decode(r."customerEnc", 'hex'), r."agentHash", r."customerHash", r."expiresAt", r."createdAt",
           r."activatedAt", r."endedAt", r."expiredAt", r.version, r.channels, r.idle
    FROM r WHERE EXISTS (SELECT 1 FROM go)
    RETURNING sessions.id, sessions.proxy_number, sessions.agent_hash, sessions.customer_hash),
  parts AS (
    INSERT INTO session_participants (proxy_number, party_hash, session_id)
    SELECT s.proxy_number, h.hash, s.id FROM s CROSS JOIN LATERAL (VALUES (s.agent_hash), (s.customer_hash)) AS h(hash)
    RETURNING 1),
  outbox_ins AS (
    INSERT INTO outbox (id, tenant_id, session_id, type, envelope, created_at, next_attempt_at, done_at, outcome)
    SELECT e.id, e.tenant_id, e.session_id, e.type, e.env, e.created_at, now(),
           CASE WHEN w.wanted THEN NULL ELSE now() END,
           CASE WHEN w.wanted THEN NULL ELSE 'skipped'::outbox_outcome END
    FROM (SELECT (x->>'id')::uuid AS id, (x->'data'->>'tenantId')::uuid AS tenant_id, r.id AS session_id,
                 x->>'type' AS type, x AS env, (x->>'createdAt')::timestamptz AS created_at, (x->'data'->>'test') = 'true' AS test
          FROM r CROSS JOIN LATERAL jsonb_array_elements(r.events) AS x WHERE EXISTS (SELECT 1 FROM s)) e
    LEFT JOIN LATERAL (
      SELECT true AS wanted FROM webhook_configs c
      WHERE c.tenant_id = e.tenant_id
        AND (e.type = ANY(c.events) OR e.type = 'session.target_swapped' OR e.test)) w ON true),
  usage_ins AS (
    INSERT INTO billing_events (id, tenant_id, billing_period_id, metric, quantity, unit_price, recorded_at,
                                session_id, call_record_id, metadata, dedupe_key)
    SELECT u.id, r.tenant, bp.id, u.metric, 1,
           CASE WHEN u.known THEN u.price ELSE (
             SELECT pr.unit_price FROM pricing pr JOIN tenants t ON t.tier = pr.tier
             WHERE t.id = r.tenant AND pr.metric = u.metric AND pr.effective_from <= r."createdAt"
               AND (pr.effective_until IS NULL OR pr.effective_until > r."createdAt")
             ORDER BY pr.effective_from DESC LIMIT 1) END,
           r."createdAt", u.session_id, NULL, u.metadata, u.dedupe_key
    FROM r JOIN billing_periods bp ON bp.tenant_id = r.tenant AND bp.period_start = r."periodStart"
    CROSS JOIN LATERAL (VALUES
      (r."usageId", 'session_created', r."priceKnown", r.price, r.id, '{}'::jsonb, NULL::text),
      (r."rentalId", 'number_rental', false, NULL::numeric, NULL::uuid, r."rentalMeta", r."rentalKey")
    ) AS u(id, metric, known, price, session_id, metadata, dedupe_key)
    WHERE EXISTS (SELECT 1 FROM parts)
    ON CONFLICT (dedupe_key) DO NOTHING)
  SELECT CASE WHEN (SELECT count(*) FROM s) = (SELECT count(*) FROM r) THEN 'ok' ELSE 'refused' END INTO verdict;
  RETURN verdict;
END
$$;
