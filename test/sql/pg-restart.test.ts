// pg crashes a process when a pooled or checked-out client emits 'error' with no listener, which
// is what a database restart or a killed backend does. These tests kill the pool's backends under
// load and, where a throwaway cluster can be started, restart a real Postgres: the process must
// survive, callers must get StoreError 'unavailable' (no driver text), and the pool must recover.
import t from 'tap'
import { execFile } from 'node:child_process'
import { chownSync, mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as delay } from 'node:timers/promises'
import { promisify } from 'node:util'
import { createPool, sql, type DatabasePool } from 'slonik'
import { openDatabase } from '../../sql/db.js'
import { StoreError } from '../../sql/errors.js'
import { migrate } from '../../sql/migrate.js'
import { createSession, getSession } from '../../sql/sessions.js'
import { testDatabase, testDatabaseUrl } from '../support/db.js'
import { addNumbers, addTenant, createArgs, party, proxy, record, type TenantFixture } from './fixtures.js'

const run = promisify(execFile)
const url = testDatabaseUrl()

/** Load: creates and reads in a loop; every failure must be a StoreError of slug 'unavailable'. */
function startLoad(pool: DatabasePool, tenant: TenantFixture, workers = 8) {
  const stats = { ok: 0, failed: 0, wrong: [] as string[] }
  let stop = false
  let n = 0
  const loops = Array.from({ length: workers }, async (_, w) => {
    while (!stop) {
      try {
        const i = n++
        const rec = record(tenant, { proxy: proxy(i % 100), agent: party(i % 10_000), customer: party((i + 5_000) % 10_000) })
        const r = await createSession(pool, createArgs(tenant, rec, 1_000_000))
        if (w % 2) await getSession(pool, tenant.id, rec.id)
        if (r === 'ok' || r === 'proxy-conflict') stats.ok++
      } catch (err) {
        stats.failed++
        if (!(err instanceof StoreError) || err.slug !== 'unavailable') stats.wrong.push(err instanceof StoreError ? `${err.slug}:${err.code}` : String(err))
        await delay(5)
      }
    }
  })
  const done = Promise.all(loops)
  return { stats, stop: async () => { stop = true; await done } }
}

t.test('killed backends under load: the process survives and the pool recovers', { skip: url ? false : 'real Postgres only (TEST_DATABASE_URL)' }, async t => {
  const codes: string[] = []
  const db = await testDatabase(t, { onError: c => codes.push(c) })
  await addNumbers(db.pool, 100)
  const tenant = await addTenant(db.pool)
  const name = await db.pool.oneFirst(sql.unsafe`SELECT current_database()`)
  const admin = await createPool(url!, { maximumPoolSize: 1 })
  t.teardown(() => admin.end())
  const kill = () => admin.oneFirst(sql.unsafe`
    SELECT count(pg_terminate_backend(pid))::int FROM pg_stat_activity WHERE datname = ${name} AND pid <> pg_backend_pid()`)

  const load = startLoad(db.pool, tenant)
  t.teardown(load.stop)
  let killed = 0
  for (let k = 0; k < 6; k++) {
    await delay(150)
    killed += (await kill()) as number
  }
  const before = load.stats.ok
  await delay(400)
  await load.stop()
  t.ok(killed > 0, `terminated ${killed} backends`)
  t.ok(load.stats.failed > 0, 'callers saw the failures')
  t.same(load.stats.wrong, [], 'every failure was StoreError unavailable')
  t.ok(load.stats.ok > before, 'work went on after the last kill')

  // The classic crash: idle pooled clients whose backend goes away.
  t.ok((await kill()) as number > 0, 'idle connections killed')
  await delay(200)
  t.equal(await db.pool.oneFirst(sql.unsafe`SELECT 1`), 1, 'the pool reconnects')
  t.ok(codes.length > 0, `connection trouble reported by code (${[...new Set(codes)].join(', ')})`)
  t.notOk(codes.some(c => /postgres:|127\.0\.0\.1/.test(c)), 'codes carry no connection details')
})

async function freePort(): Promise<number> {
  const s = createServer()
  await new Promise<void>(r => s.listen(0, '127.0.0.1', r))
  const port = (s.address() as { port: number }).port
  await new Promise(r => s.close(r))
  return port
}

async function canRunCluster(): Promise<string | false> {
  if (!url) return 'real Postgres only (TEST_DATABASE_URL)'
  if (process.getuid?.() !== 0) return 'needs root to start a throwaway cluster as user postgres'
  try {
    await run('su', ['postgres', '-c', 'command -v initdb && command -v pg_ctl'])
    return false
  } catch {
    return 'initdb/pg_ctl or user postgres not available'
  }
}

t.test('a Postgres restart never crashes the process; the pool reconnects', { skip: await canRunCluster() }, async t => {
  const port = await freePort()
  const dir = mkdtempSync(join(tmpdir(), 'maskline-pg-'))
  chownSync(dir, Number((await run('id', ['-u', 'postgres'])).stdout.trim()), Number((await run('id', ['-g', 'postgres'])).stdout.trim()))
  const pgctl = (args: string) => run('su', ['postgres', '-c', `pg_ctl -D ${dir}/data -w ${args}`])
  // -l always: without it the postmaster inherits pg_ctl's stdout and execFile never returns.
  const opts = `-o '-p ${port} -k ${dir} -c listen_addresses=127.0.0.1' -l ${dir}/log`
  await run('su', ['postgres', '-c', `initdb -D ${dir}/data -A trust -U postgres >/dev/null`])
  await pgctl(`${opts} start`)
  t.teardown(async () => {
    await pgctl('-m immediate stop').catch(() => {})
    rmSync(dir, { recursive: true, force: true })
  })

  const codes: string[] = []
  const db = await openDatabase({ databaseUrl: `postgres://postgres@127.0.0.1:${port}/postgres`, dataDir: '', onError: c => codes.push(c) })
  t.teardown(() => db.close())
  await migrate(db.pool)
  await addNumbers(db.pool, 100)
  const tenant = await addTenant(db.pool)

  const load = startLoad(db.pool, tenant)
  t.teardown(load.stop)
  await delay(300)
  await pgctl(`${opts} -m fast restart`)
  const before = load.stats.ok
  await delay(500)
  await load.stop()
  t.ok(load.stats.failed > 0, 'callers saw the restart')
  t.same(load.stats.wrong, [], 'every failure was StoreError unavailable')
  t.ok(load.stats.ok > before, 'work resumed after the restart')

  // Restart again while every pooled connection is idle.
  await pgctl(`${opts} -m immediate restart`)
  await delay(200)
  t.equal(await db.pool.oneFirst(sql.unsafe`SELECT 1`), 1, 'the pool reconnects')
  t.ok(codes.length > 0, `reported by code (${[...new Set(codes)].join(', ')})`)
})
