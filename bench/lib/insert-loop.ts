// Baseline of scenario 4: what the database in use does with single-row INSERTs from 8
// connections (a pg Pool of 8, 8 loops each awaiting its INSERT), for a fixed time. Against real
// Postgres it connects to DATABASE_URL; in embedded mode it serves the run's DATA_DIR with the
// service's own embedded server (sql/pglite-server.ts), so both modes use the same client.
//
//   node --import tsx bench/lib/insert-loop.ts '{"url"|"dataDir": …, "seconds": 5, "connections": 8}'
// Prints `INSERTJSON {"inserts":…,"seconds":…,"p50_us":…,"p99_us":…}`.
import { randomBytes, randomUUID } from 'node:crypto'
import { join } from 'node:path'
import pg from 'pg'

interface Args { url?: string; dataDir?: string; seconds: number; connections: number }
const args = JSON.parse(process.argv[2] ?? '{}') as Args

let url = args.url
let closeEmbedded = async () => {}
if (!url) {
  const { PGlite } = await import('@electric-sql/pglite')
  const { serveEmbedded } = await import('../../sql/pglite-server.js')
  const db = await PGlite.create(join(args.dataDir!, 'pg'))
  const server = await serveEmbedded(db)
  url = `postgres://postgres@${server.host}:${server.port}/postgres`
  closeEmbedded = async () => { await server.close(); await db.close() }
}

const pool = new pg.Pool({ connectionString: url, max: args.connections })
// A row about as wide as a session's: ids, a proxy, two encrypted numbers, two hashes, times.
await pool.query(`CREATE TABLE IF NOT EXISTS bench_insert_loop (
  id uuid PRIMARY KEY, tenant_id uuid NOT NULL, proxy_number text NOT NULL, state text NOT NULL,
  agent_enc bytea NOT NULL, customer_enc bytea NOT NULL, agent_hash text NOT NULL, customer_hash text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(), expires_at timestamptz NOT NULL)`)
const tenant = randomUUID()
const enc = randomBytes(40)
const hash = randomBytes(32).toString('hex')
const INSERT = `INSERT INTO bench_insert_loop (id, tenant_id, proxy_number, state, agent_enc, customer_enc, agent_hash, customer_hash, expires_at)
  VALUES ($1, $2, $3, 'ACTIVE', $4, $5, $6, $7, now() + interval '1 day')`

// Warm every connection before timing.
await Promise.all(Array.from({ length: args.connections }, () => pool.query('SELECT 1')))
const samples: number[] = []
const deadline = performance.now() + args.seconds * 1000
const t0 = performance.now()
await Promise.all(Array.from({ length: args.connections }, async () => {
  while (performance.now() < deadline) {
    const s = performance.now()
    await pool.query(INSERT, [randomUUID(), tenant, '+12025550100', enc, enc, hash, hash])
    samples.push(performance.now() - s)
  }
}))
const seconds = (performance.now() - t0) / 1000
await pool.query('DROP TABLE bench_insert_loop')
await pool.end()
await closeEmbedded()
samples.sort((a, b) => a - b)
const q = (p: number) => Math.round((samples[Math.min(samples.length - 1, Math.floor(p * samples.length))] ?? Number.NaN) * 1000)
console.log('INSERTJSON ' + JSON.stringify({ inserts: samples.length, seconds, p50_us: q(0.5), p99_us: q(0.99) }))
