// What escapes every handler. An unhandled rejection is logged and counted and the
// process keeps serving; an uncaught exception closes the service (bounded) and exits 1.
import t from 'tap'
import { EventEmitter } from 'node:events'
import { Writable } from 'node:stream'
import { createLogger } from '../../api/log.js'
import { installProcessPolicy } from '../../gateway/process-policy.js'

function setup(close: () => Promise<void>) {
  const lines: string[] = []
  const log = createLogger({ level: 'info', destination: new Writable({ write(c, _e, cb) { lines.push(String(c)); cb() } }) })
  const proc = new EventEmitter()
  const exits: number[] = []
  const policy = installProcessPolicy(proc as never, { log, close, exit: code => exits.push(code), graceMs: 200 })
  return { proc, exits, lines, policy }
}

t.test('an unhandled rejection is logged and counted; the process keeps serving', async t => {
  let closed = 0
  const { proc, exits, lines, policy } = setup(async () => { closed++ })
  proc.emit('unhandledRejection', new Error('background bug'))
  proc.emit('unhandledRejection', 'a string')
  t.equal(policy.unhandled, 2)
  t.same(exits, [], 'no exit')
  t.equal(closed, 0, 'nothing closed')
  t.equal(lines.filter(l => l.includes('"unhandled-rejection"') && l.includes('"level":50')).length, 2, 'one error line each')
})

t.test('an uncaught exception closes the service, then exits 1', async t => {
  let closed = 0
  const { proc, exits, lines } = setup(async () => { closed++ })
  proc.emit('uncaughtException', new Error('state may be corrupt'))
  proc.emit('uncaughtException', new Error('again'))
  await new Promise(r => setImmediate(r))
  t.equal(closed, 1, 'closed once')
  t.same(exits, [1])
  t.ok(lines.some(l => l.includes('"uncaught-exception"') && l.includes('"level":60')), 'logged as fatal')
})

t.test('a close that hangs still exits 1 after the grace', async t => {
  const { proc, exits } = setup(() => new Promise(() => {}))
  proc.emit('uncaughtException', new Error('stuck'))
  await new Promise(r => setTimeout(r, 300))
  t.same(exits, [1])
})
