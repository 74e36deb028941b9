// Baseline: the record ceiling — the least work a routed, recorded call needs, on bare
// uWS with raw pg: read the form body, one Map lookup for (proxy, caller), render the service's own
// <Dial> (connectTexml), and append the call row and its `call.incoming` outbox row in 10 ms group
// commits, one multi-row INSERT from arrays (unnest) per commit, one commit at a time. Answers go
// out before the commit, as the service's do (the record writer is write-behind too).
//
// Its tables have the columns, checks, unique keys and partial outbox indexes of ours, and the
// secondary indexes of call_records that the API and analytics read through: (session_id, id),
// (tenant_id, id), (tenant_id, initiated_at) — not the global (initiated_at) one, since the
// retention purge can walk the per-tenant one. What it leaves out, on purpose, because the service need not do it per call: signature
// checks, the access log, the local journal, the `call_count` update of the session, foreign keys
// (or any per-row check that the session exists), the webhook-config lookup per event (the bench's
// tenants have no webhook: rows are written as the service writes them then, `skipped`). The
// party-B hash is computed once per session, as create knows it.
//
// Its tables are its own scratch tables (bench_ceiling_*), created at start and dropped at exit,
// in the run's bench database (bench/lib/database.ts), never the service's tables.
//
//   node --import tsx bench/baselines/record-ceiling.ts <port> '{"sessions":…,"proxies":…,"tenants":…,"url"|"dataDir":…}'
// Prints `listening <port>`; GET /stats answers {answered, committed, errorRows, commits, maxRows,
// errors, pending, backendPid}; on SIGTERM it commits what is queued, prints `CEILINGJSON {…stats, callRows, outboxRows}`,
// drops its tables and exits.
import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import pg from 'pg'
import uWS from 'uWebSockets.js'
import { parseForm } from '../../api/cpaas/form.js'
import { connectTexml, EMPTY_RESPONSE, TEXML_CONTENT_TYPE } from '../../api/cpaas/telnyx/texml.js'
import { uuidv7 } from '../../sql/vocabulary/ids.js'
import { createPartyHasher } from '../../sql/crypto.js'
import { agentOf, customerOf, proxyOf, sessionIdOf, tenantIdOf, tenantOfSession, type Population } from '../lib/population.js'

interface Args { sessions: number; proxies: number; tenants: number; url?: string; dataDir?: string }
const port = Number(process.argv[2] ?? 0)
const args = JSON.parse(process.argv[3] ?? '{}') as Args
const FLUSH_MS = 10
const baseUrl = `http://127.0.0.1:${port}`

let url = args.url
let closeEmbedded = async () => {}
if (!url) {
  // Embedded mode: the database lives in this process, as it does in the service's.
  const { PGlite } = await import('@electric-sql/pglite')
  const { serveEmbedded } = await import('../../sql/pglite-server.js')
  const db = await PGlite.create(join(args.dataDir!, 'pg'))
  const server = await serveEmbedded(db)
  url = `postgres://postgres@${server.host}:${server.port}/postgres`
  closeEmbedded = async () => { await server.close(); await db.close() }
}
const client = new pg.Client({ connectionString: url })
await client.connect()
/** Its Postgres backend, whose CPU time the runner reads (a local server only; none embedded). */
const backendPid = args.url ? (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid : null

// The columns, types and checks of call_records and outbox (sql/migrations/001_init.sql).
await client.query(`
  DROP TABLE IF EXISTS bench_ceiling_call_records, bench_ceiling_outbox;
  CREATE TABLE bench_ceiling_call_records (
    id                        uuid PRIMARY KEY,
    session_id                uuid NOT NULL,
    tenant_id                 uuid NOT NULL,
    provider_call_id          text NOT NULL UNIQUE,
    status                    text NOT NULL CHECK (status IN ('RINGING','ANSWERED','COMPLETED','MISSED','FAILED')),
    direction                 text NOT NULL CHECK (direction IN ('A_TO_B','B_TO_A')),
    duration_seconds          integer NOT NULL DEFAULT 0,
    initiated_at              timestamptz NOT NULL,
    answered_at               timestamptz,
    ended_at                  timestamptz,
    recording_url             text,
    recording_duration_seconds integer,
    recording_consent_played  boolean NOT NULL DEFAULT false,
    party_b_hash              text NOT NULL);
  CREATE INDEX ON bench_ceiling_call_records (session_id, id);
  CREATE INDEX ON bench_ceiling_call_records (tenant_id, id);
  CREATE INDEX ON bench_ceiling_call_records (tenant_id, initiated_at);
  CREATE TABLE bench_ceiling_outbox (
    id               uuid PRIMARY KEY,
    tenant_id        uuid NOT NULL,
    session_id       uuid,
    type             text NOT NULL,
    envelope         jsonb NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    attempts         integer NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    locked_until     timestamptz,
    done_at          timestamptz,
    outcome          text CHECK (outcome IN ('delivered','skipped','failed')));
  CREATE INDEX ON bench_ceiling_outbox (next_attempt_at, id) WHERE done_at IS NULL;
  CREATE INDEX ON bench_ceiling_outbox (session_id, id) WHERE done_at IS NULL;`)

// One statement per commit: the call rows, then the outbox rows of those it inserted (a replayed
// CallSid inserts nothing and writes no event), as sql/record-apply.ts insertCalls does.
const APPLY = {
  name: 'bench_ceiling_apply',
  text: `
    WITH r AS (
      SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::text[], $5::text[], $6::float8[], $7::text[], $8::uuid[], $9::text[])
        AS r(id, session_id, tenant_id, provider_call_id, direction, at_ms, party_b_hash, event_id, envelope)),
    ins AS (
      INSERT INTO bench_ceiling_call_records (id, session_id, tenant_id, provider_call_id, status, direction, initiated_at, party_b_hash)
      SELECT id, session_id, tenant_id, provider_call_id, 'RINGING', direction, to_timestamp(at_ms / 1000), party_b_hash FROM r
      ON CONFLICT (provider_call_id) DO NOTHING
      RETURNING id)
    INSERT INTO bench_ceiling_outbox (id, tenant_id, session_id, type, envelope, created_at, next_attempt_at, done_at, outcome)
    SELECT r.event_id, r.tenant_id, r.session_id, 'call.incoming', r.envelope::jsonb, to_timestamp(r.at_ms / 1000), now(), now(), 'skipped'
    FROM r JOIN ins USING (id)
    ON CONFLICT (id) DO NOTHING`,
}

// The population of bench/lib/population.ts, as the engine holds it after boot.
interface Session { id: string; tenantId: string; agent: string; customer: string; partyBHash: string }
const pop: Population = { sessions: args.sessions, proxies: args.proxies, tenants: args.tenants, exchangeKeys: 0 }
const hash = createPartyHasher(randomBytes(32))
const salts = Array.from({ length: pop.tenants }, () => randomBytes(32))
const table = new Map<string, Map<string, Session>>()
for (let i = 0; i < pop.sessions; i++) {
  const t = tenantOfSession(i, pop)
  const s: Session = { id: sessionIdOf(i), tenantId: tenantIdOf(t), agent: agentOf(i), customer: customerOf(i), partyBHash: hash(salts[t]!, customerOf(i)) }
  const p = proxyOf(i, pop.proxies)
  let m = table.get(p)
  if (!m) table.set(p, m = new Map())
  m.set(s.agent, s)
  m.set(s.customer, s)
}

/** The rows of one commit, column by column: what the unnest arrays are made of. */
class Batch {
  n = 0
  readonly first = Date.now()
  readonly ids: string[] = []
  readonly sessions: string[] = []
  readonly tenants: string[] = []
  readonly sids: string[] = []
  readonly dirs: string[] = []
  readonly at: number[] = []
  readonly hashes: string[] = []
  readonly events: string[] = []
  readonly envelopes: string[] = []
}

/** Calls answered; rows committed (or lost with a failed commit: errorRows); commits, the largest. */
const stats = { answered: 0, committed: 0, errorRows: 0, commits: 0, maxRows: 0, errors: 0 }
let queue: Batch | null = null
let timer: NodeJS.Timeout | null = null
let applying: Promise<void> | null = null

function append(s: Session, callId: string, callSid: string, direction: 'A_TO_B' | 'B_TO_A', proxy: string, now: number): void {
  const b = queue ??= new Batch()
  b.n++
  b.ids.push(callId)
  b.sessions.push(s.id)
  b.tenants.push(s.tenantId)
  b.sids.push(callSid)
  b.dirs.push(direction)
  b.at.push(now)
  b.hashes.push(s.partyBHash)
  const eventId = uuidv7(now)
  b.events.push(eventId)
  // The envelope the service writes (sql/vocabulary/event-envelope.ts newEnvelope), key for key.
  b.envelopes.push(JSON.stringify({
    id: eventId, type: 'call.incoming', createdAt: new Date(now).toISOString(),
    data: { sessionId: s.id, tenantId: s.tenantId, proxyNumber: proxy, callId, direction, status: 'RINGING', durationSeconds: 0 },
  }))
  if (!applying) timer ??= setTimeout(commit, FLUSH_MS)
}

/** Commits everything queued, one statement; what arrives meanwhile goes in the next commit. */
function commit(): void {
  timer = null
  const b = queue
  if (!b || applying) return
  queue = null
  applying = (async () => {
    try {
      await client.query({ ...APPLY, values: [b.ids, b.sessions, b.tenants, b.sids, b.dirs, b.at, b.hashes, b.events, b.envelopes] })
      stats.committed += b.n
      stats.commits++
      stats.maxRows = Math.max(stats.maxRows, b.n)
    } catch (err) {
      stats.errors++
      stats.errorRows += b.n
      process.stderr.write(`record ceiling: commit of ${b.n} rows failed: ${(err as Error).message}\n`)
    } finally {
      applying = null
      // A backlog that waited behind this commit goes now; a young batch waits out its 10 ms.
      const next = queue as Batch | null // appended to while the commit ran
      if (next) timer ??= setTimeout(commit, Math.max(0, next.first + FLUSH_MS - Date.now()))
    }
  })()
}

const pending = () => stats.answered - stats.committed - stats.errorRows

function answer(res: uWS.HttpResponse, status: string | null, xml: string): void {
  res.cork(() => {
    if (status) res.writeStatus(status)
    res.writeHeader('content-type', TEXML_CONTENT_TYPE)
    res.end(xml)
  })
}

const app = uWS.App()
app.post('/v1/webhooks/cpaas/voice', (res, _req) => {
  let buf: Buffer | null = null
  let aborted = false
  res.onAborted(() => { aborted = true })
  res.onData((chunk, last) => {
    const c = Buffer.from(chunk)
    buf = buf ? Buffer.concat([buf, c]) : c
    if (!last || aborted) return
    const f = parseForm(buf)
    const callSid = f?.['CallSid'], from = f?.['From'], to = f?.['To']
    if (!callSid || !from || !to) return answer(res, '400 Bad Request', EMPTY_RESPONSE)
    const s = table.get(to)?.get(from)
    if (!s) return answer(res, null, '<?xml version="1.0" encoding="UTF-8"?><Response><Reject/></Response>')
    const now = Date.now()
    const callId = uuidv7(now)
    const fromAgent = from === s.agent
    const xml = connectTexml({ baseUrl, callId, to: fromAgent ? s.customer : s.agent, callerId: to, recording: false, consent: 'DEFAULT', consentAudioUrl: null })
    append(s, callId, callSid, fromAgent ? 'A_TO_B' : 'B_TO_A', to, now)
    stats.answered++
    answer(res, null, xml)
  })
})
app.get('/stats', res => {
  res.writeHeader('content-type', 'application/json').end(JSON.stringify({ ...stats, pending: pending(), backendPid }))
})

let listenSocket: uWS.us_listen_socket | null = null
app.listen('127.0.0.1', port, sock => {
  if (!sock) process.exit(1)
  listenSocket = sock
  process.stdout.write(`listening ${uWS.us_socket_local_port(sock)}\n`)
})

process.once('SIGTERM', () => void (async () => {
  if (listenSocket) uWS.us_listen_socket_close(listenSocket)
  const deadline = Date.now() + 60_000
  while ((queue || applying) && Date.now() < deadline) {
    if (queue && !applying) commit()
    await (applying ?? new Promise(r => setTimeout(r, FLUSH_MS)))
  }
  const counts = await client.query<{ calls: number; events: number }>(
    'SELECT (SELECT count(*)::int FROM bench_ceiling_call_records) AS calls, (SELECT count(*)::int FROM bench_ceiling_outbox) AS events')
  process.stdout.write(`CEILINGJSON ${JSON.stringify({ ...stats, pending: pending(), callRows: counts.rows[0]!.calls, outboxRows: counts.rows[0]!.events })}\n`)
  await client.query('DROP TABLE bench_ceiling_call_records, bench_ceiling_outbox')
  await client.end()
  await closeEmbedded()
  process.exit(0)
})())
