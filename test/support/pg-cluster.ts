// A Postgres server a test may stop, crash and start again (test/durability/pg-restart.test.ts,
// pg-outage.test.ts): by default a private, throwaway cluster (initdb into a temp directory, the
// newest Postgres binaries under /usr/lib/postgresql, run as the postgres user) on a free port, so
// stopping it cannot break the other test files tap runs in parallel against the shared server;
// or the server of TEST_DATABASE_URL itself through pg_ctlcluster (mainCluster), whose teardown
// makes sure it is up again.
import { execFile, execFileSync } from 'node:child_process'
import { chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir, userInfo } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'

const run = promisify(execFile)

export interface PgServer {
  label: string
  /** postgres:// URL of the server (database `postgres`). */
  url: string
  restartFast(): Promise<void>
  stopImmediate(): Promise<void>
  start(): Promise<void>
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer()
    s.once('error', reject)
    s.listen(0, '127.0.0.1', () => {
      const a = s.address()
      s.close(() => (a && typeof a === 'object' ? resolve(a.port) : reject(new Error('no port'))))
    })
  })
}

export function pgBinDir(): string | null {
  const root = '/usr/lib/postgresql'
  if (!existsSync(root)) return null
  const versions = readdirSync(root).filter(v => existsSync(join(root, v, 'bin', 'pg_ctl'))).sort((a, b) => Number(b) - Number(a))
  return versions.length ? join(root, versions[0]!, 'bin') : null
}

/** A throwaway cluster on a free port, owned by the postgres user; stopped and removed at teardown. */
/** Why no private cluster can be started here (the skip reason), or null when one can. */
export function privateClusterMissing(): string | null {
  const me = userInfo().username
  if (!pgBinDir()) return 'the Postgres binaries under /usr/lib/postgresql (Debian: apt-get install postgresql)'
  if (me !== 'root' && me !== 'postgres') return 'a private Postgres cluster must be started as root or postgres'
  return null
}

export async function privateCluster(tt: { teardown(fn: () => unknown): void }): Promise<PgServer | null> {
  const bin = pgBinDir()
  const me = userInfo().username
  if (!bin || privateClusterMissing()) return null
  const asPg = (cmd: string, args: string[]) => (me === 'root' ? run('runuser', ['-u', 'postgres', '--', join(bin, cmd), ...args]) : run(join(bin, cmd), args))
  const dir = mkdtempSync(join(tmpdir(), 'maskline-pg-'))
  const pgdata = join(dir, 'data')
  if (me === 'root') {
    const uid = Number((await run('id', ['-u', 'postgres'])).stdout.trim())
    const gid = Number((await run('id', ['-g', 'postgres'])).stdout.trim())
    chownSync(dir, uid, gid)
  }
  try {
    mkdirSync(pgdata, { mode: 0o700 })
    if (me === 'root') chownSync(pgdata, Number((await run('id', ['-u', 'postgres'])).stdout.trim()), Number((await run('id', ['-g', 'postgres'])).stdout.trim()))
    await asPg('initdb', ['-D', pgdata, '-A', 'trust', '-U', 'postgres', '-E', 'UTF8', '--no-sync'])
  } catch (err) {
    rmSync(dir, { recursive: true, force: true })
    throw err
  }
  const port = await freePort()
  const opts = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=on -c max_connections=50`
  const ctl = (...args: string[]) => asPg('pg_ctl', ['-D', pgdata, '-l', join(dir, 'log'), '-w', '-t', '30', ...args])
  // Stopped at teardown, or when this process exits without one (a tap timeout).
  const stopSync = () => {
    try {
      const args = ['-D', pgdata, '-m', 'immediate', '-w', 'stop']
      if (me === 'root') execFileSync('runuser', ['-u', 'postgres', '--', join(bin, 'pg_ctl'), ...args], { stdio: 'ignore' })
      else execFileSync(join(bin, 'pg_ctl'), args, { stdio: 'ignore' })
    } catch { /* not running */ }
    rmSync(dir, { recursive: true, force: true })
  }
  process.once('exit', stopSync)
  tt.teardown(async () => {
    await ctl('-m', 'immediate', 'stop').catch(() => {})
    rmSync(dir, { recursive: true, force: true })
    process.off('exit', stopSync)
  })
  await ctl('-o', opts, 'start')
  return {
    label: `a private cluster (${bin}, port ${port})`,
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    restartFast: async () => { await ctl('-m', 'fast', '-o', opts, 'restart') },
    stopImmediate: async () => { await ctl('-m', 'immediate', 'stop') },
    start: async () => { await ctl('-o', opts, 'start') },
  }
}

/** The server of TEST_DATABASE_URL through pg_ctlcluster; teardown starts it if it is down. */
export async function mainCluster(tt: { teardown(fn: () => unknown): void }, url: string): Promise<PgServer> {
  const port = new URL(url).port || '5432'
  const list = (await run('pg_lsclusters', ['--no-header'])).stdout.split('\n').map(l => l.trim().split(/\s+/)).find(c => c[2] === port)
  if (!list) throw new Error(`no local cluster on port ${port}`)
  const [ver, name] = list as [string, string]
  const ctl = (action: string, ...extra: string[]) => run('pg_ctlcluster', ['--skip-systemctl-redirect', ...extra, ver, name, action])
  tt.teardown(async () => {
    // Postgres must be up at the end, whatever happened.
    const up = await run('pg_isready', ['-h', '127.0.0.1', '-p', port]).then(() => true, () => false)
    if (!up) await ctl('start')
  })
  return {
    label: `the server of TEST_DATABASE_URL (cluster ${ver}/${name})`,
    url,
    restartFast: async () => { await ctl('restart', '-m', 'fast') },
    stopImmediate: async () => { await ctl('stop', '-m', 'immediate') },
    start: async () => { await ctl('start') },
  }
}

