// A private redis-server for the tests that kill, restart or pause Redis (test/cluster/,
// test/durability/redis-outage.test.ts): on a free port of its own, never the shared
// TEST_REDIS_URL one, with no persistence, so a restart comes back empty (the worst case).
import { spawn, type ChildProcess } from 'node:child_process'
import { Redis } from 'ioredis'
import { freePort } from './pg-cluster.js'

const sleep = (ms: number) => new Promise(r => setTimeout(r, ms))

type Teardown = { teardown(fn: () => unknown): void }

/** A private redis-server on its own port: no persistence, so a restart comes back empty. */
export async function privateRedis(t: Teardown) {
  const port = await freePort()
  let proc: ChildProcess | null = null
  async function start() {
    const p = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: ['ignore', 'pipe', 'pipe'] })
    proc = p
    let out = ''
    p.stdout!.setEncoding('utf8').on('data', (d: string) => { out = (out + d).slice(-4_000) })
    p.stderr!.setEncoding('utf8').on('data', (d: string) => { out = (out + d).slice(-4_000) })
    const failed = new Promise<never>((_, reject) => {
      p.once('error', err => reject(new Error(`redis-server could not start (${err.message}); it must be on PATH for the tests that kill Redis`)))
      p.once('exit', code => reject(new Error(`redis-server exited (${code}):\n${out}`)))
    })
    failed.catch(() => {})
    for (const deadline = Date.now() + 10_000; ;) {
      const probe = new Redis({ port, host: '127.0.0.1', lazyConnect: true, enableOfflineQueue: false, retryStrategy: () => null, maxRetriesPerRequest: 0 })
      probe.on('error', () => {})
      try {
        await Promise.race([probe.connect().then(() => probe.ping()), failed])
        return
      } catch (err) {
        if (Date.now() > deadline || /redis-server/.test(String(err))) throw err
        await sleep(50)
      } finally {
        probe.disconnect()
      }
    }
  }
  async function kill() {
    const p = proc
    if (!p || p.exitCode !== null || p.signalCode !== null) return
    const exited = new Promise(r => p.once('exit', r))
    p.kill('SIGKILL') // by its own pid
    await exited
  }
  t.teardown(kill)
  await start()
  const url = `redis://127.0.0.1:${port}`
  /** A client for the test's own looks at the stream (closed at teardown). */
  function client(): Redis {
    const c = new Redis(url, { maxRetriesPerRequest: 1, retryStrategy: n => Math.min(n * 100, 1_000) })
    c.on('error', () => {})
    t.teardown(() => c.disconnect())
    return c
  }
  return { port, url, start, kill, client }
}
