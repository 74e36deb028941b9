// docs/operations.md: SIGTERM and SIGINT start the graceful stop once (gateway/process-policy.ts
// installShutdown); exit 0 when the service closed, 1 when closing failed or overran its deadline.
// The readiness route answers 503 while booting and draining. (The whole stop, in a real child
// process under load: test/durability/sigterm.test.ts.)
import t from 'tap'
import { EventEmitter } from 'node:events'
import { Writable } from 'node:stream'
import { createLogger } from '../../api/log.js'
import { readinessRoute, type Readiness } from '../../api/routes/health.js'
import { installShutdown } from '../../gateway/process-policy.js'

function setup(close: () => Promise<void>, deadlineMs = 1_000) {
  const lines: string[] = []
  const log = createLogger({ level: 'info', destination: new Writable({ write(c, _e, cb) { lines.push(String(c)); cb() } }) })
  const proc = new EventEmitter()
  const exits: number[] = []
  const state = installShutdown(proc as never, { log, close, exit: code => exits.push(code), deadlineMs })
  return { proc, exits, lines, state }
}

t.test('SIGTERM closes once and exits 0; a second signal changes nothing', async t => {
  let closes = 0
  let finish!: () => void
  const { proc, exits, lines, state } = setup(() => { closes++; return new Promise<void>(r => { finish = r }) })
  proc.emit('SIGTERM', 'SIGTERM')
  t.ok(state.stopping)
  proc.emit('SIGINT', 'SIGINT')
  t.equal(closes, 1, 'closed once')
  t.same(exits, [], 'no exit before the close completes')
  finish()
  await new Promise(r => setImmediate(r))
  t.same(exits, [0])
  t.ok(lines.some(l => l.includes('"msg":"shutting down"')) && lines.some(l => l.includes('already shutting down')))
})

t.test('a close that fails exits 1; one that overruns the deadline exits 1', async t => {
  const failing = setup(() => Promise.reject(new Error('boom')))
  failing.proc.emit('SIGTERM', 'SIGTERM')
  await new Promise(r => setImmediate(r))
  t.same(failing.exits, [1])
  const stuck = setup(() => new Promise<void>(() => {}), 50)
  stuck.proc.emit('SIGTERM', 'SIGTERM')
  await new Promise(r => setTimeout(r, 120))
  t.same(stuck.exits, [1])
  t.ok(stuck.lines.some(l => l.includes('"shutdown-deadline"')))
})

t.test('readiness: 200 only when ready', async t => {
  let state: Readiness = 'booting'
  const def = readinessRoute(() => state)
  const ask = async () => def.handler({ services: { now: () => 0 } } as never) as Promise<{ status: number; body: { status: string } }>
  t.same(await ask().then(r => [r.status, r.body.status]), [503, 'booting'])
  state = 'ready'
  t.same(await ask().then(r => [r.status, r.body.status]), [200, 'ready'])
  state = 'draining'
  t.same(await ask().then(r => [r.status, r.body.status]), [503, 'draining'])
})
