-- Current price list (contract 2.7, contract D7): one row per tier x metric, USD. A billing event
-- records the unit price in force when it happens; a price change later supersedes a row by
-- setting its effective_until and inserting the new row (pricing_current allows one current row
-- per tier and metric). Idempotent: rows that exist are kept.
--   unit_price        price per unit inside the plan
--   included_quantity units per billing period (calendar month) included in the plan
--   overage_price     price per unit beyond the included quantity
-- number_rental is per proxy number per UTC day held; minutes are whole minutes (rounded up).
INSERT INTO pricing (id, tier, metric, unit_price, included_quantity, overage_price, currency, effective_from) VALUES
  ('01941f29-7c00-7000-9a4b-3f111d86c0f9', 'STARTER',    'session_created',  0.005,    100, 0.006,  'USD', '2025-01-01T00:00:00Z'),
  ('01941f29-7c00-7001-bdbd-68cd0d73f11c', 'STARTER',    'call_minute',      0.015,    100, 0.018,  'USD', '2025-01-01T00:00:00Z'),
  ('01941f29-7c00-7002-835b-005f4c3b6249', 'STARTER',    'sms_sent',         0.0079,   100, 0.0095, 'USD', '2025-01-01T00:00:00Z'),
  ('01941f29-7c00-7003-a3db-47caf65e8a38', 'STARTER',    'sms_received',     0.0079,   100, 0.0095, 'USD', '2025-01-01T00:00:00Z'),
  ('01941f29-7c00-7004-8d31-ab242f443022', 'STARTER',    'recording_minute', 0.0025,     0, 0.003,  'USD', '2025-01-01T00:00:00Z'),
  ('01941f29-7c00-7005-91ea-2280acd0afba', 'STARTER',    'number_rental',    0.05,       0, 0.05,   'USD', '2025-01-01T00:00:00Z'),
  ('01941f29-7c00-7006-add9-57d3080a0ea3', 'GROWTH',     'session_created',  0.004,   1000, 0.005,  'USD', '2025-01-01T00:00:00Z'),
  ('01941f29-7c00-7007-91ad-159cb3a7e075', 'GROWTH',     'call_minute',      0.012,   1000, 0.014,  'USD', '2025-01-01T00:00:00Z'),
  ('01941f29-7c00-7008-8685-39aa5b7d68d1', 'GROWTH',     'sms_sent',         0.007,   1000, 0.0085, 'USD', '2025-01-01T00:00:00Z'),
  ('01941f29-7c00-7009-b88b-e46d95fda542', 'GROWTH',     'sms_received',     0.007,   1000, 0.0085, 'USD', '2025-01-01T00:00:00Z'),
  ('01941f29-7c00-700a-bd44-c968cd4723aa', 'GROWTH',     'recording_minute', 0.002,    500, 0.0025, 'USD', '2025-01-01T00:00:00Z'),
  ('01941f29-7c00-700b-a0cd-e4f9ae9a5999', 'GROWTH',     'number_rental',    0.04,       0, 0.04,   'USD', '2025-01-01T00:00:00Z'),
  ('01941f29-7c00-700c-a9a7-659c851c44ee', 'ENTERPRISE', 'session_created',  0.003,  10000, 0.004,  'USD', '2025-01-01T00:00:00Z'),
  ('01941f29-7c00-700d-ae26-6100e547b995', 'ENTERPRISE', 'call_minute',      0.01,   10000, 0.012,  'USD', '2025-01-01T00:00:00Z'),
  ('01941f29-7c00-700e-8948-1e33eda7bb2b', 'ENTERPRISE', 'sms_sent',         0.006,  10000, 0.0072, 'USD', '2025-01-01T00:00:00Z'),
  ('01941f29-7c00-700f-836c-d50fc74a3be3', 'ENTERPRISE', 'sms_received',     0.006,  10000, 0.0072, 'USD', '2025-01-01T00:00:00Z'),
  ('01941f29-7c00-7010-b299-c1d5a568c24b', 'ENTERPRISE', 'recording_minute', 0.0015,  5000, 0.002,  'USD', '2025-01-01T00:00:00Z'),
  ('01941f29-7c00-7011-a93c-0adad38f1985', 'ENTERPRISE', 'number_rental',    0.033,      0, 0.033,  'USD', '2025-01-01T00:00:00Z')
ON CONFLICT DO NOTHING;
