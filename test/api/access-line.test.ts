// api/log.ts accessLineWriter: the access line composed without pino's per-line work is the line
// pino itself writes for the same fields, byte for byte (time aside): on the service's logger, on
// a child logger with bindings, with and without tenantId / instance / aborted, for odd method and
// route text; nothing below the logger's level; and a logger it cannot mirror (a mixin) still logs
// through pino.
import t from 'tap'
import { pino } from 'pino'
import { accessLineWriter, createLogger } from '../../api/log.js'

function capture() {
  const lines: string[] = []
  return { lines, destination: { write: (s: string) => { lines.push(s) } } }
}

const untimed = (line: string) => line.replace(/,"time":\d+/, ',"time":0')

const CASES: Array<[string, string | null, number, number, string | undefined, string | undefined, boolean]> = [
  ['GET', '/v1/sessions/:id', 200, 35, '0190b8a4-0000-7000-8000-000000000001', undefined, false],
  ['POST', '/v1/webhooks/cpaas/voice', 200, 12, undefined, undefined, false],
  ['DELETE', '/v1/sessions/:id', 404, 80, 'tenant', 'https://h/problems/not-found#x', false],
  ['PATCH', null, 405, 1, undefined, undefined, true],
  ['M"\\\u0001', '/a"b\\c/é', 499, 0, undefined, 'x"y', true],
]

for (const [name, make] of [
  ['the service logger', (d: { write(s: string): void }) => createLogger({ destination: d })],
  ['a child logger with bindings', (d: { write(s: string): void }) => createLogger({ destination: d, base: { service: 'maskline', node: 'n"1' } }).child({ component: 'http' })],
] as const) {
  t.test(`${name}: the same line pino writes`, async t => {
    const ours = capture(), theirs = capture()
    const write = accessLineWriter(make(ours.destination))
    const log = make(theirs.destination)
    for (const [method, route, status, us, tenantId, instance, aborted] of CASES) {
      write(method, route, status, us, tenantId, instance, aborted)
      const line: Record<string, unknown> = { method, route, status, us }
      if (tenantId !== undefined) line.tenantId = tenantId
      if (instance !== undefined) line.instance = instance
      if (aborted) line.aborted = true
      log.info(line, 'request')
    }
    t.equal(ours.lines.length, CASES.length)
    t.same(ours.lines.map(untimed), theirs.lines.map(untimed))
    for (const l of ours.lines) t.match(JSON.parse(l), { level: 30, time: Number, msg: 'request' })
  })
}

t.test('nothing is written below the logger level, at once when the level changes', async t => {
  const c = capture()
  const log = createLogger({ destination: c.destination, level: 'warn' })
  const write = accessLineWriter(log)
  write('GET', '/x', 200, 1, undefined, undefined, false)
  t.equal(c.lines.length, 0)
  log.level = 'info'
  write('GET', '/x', 200, 1, undefined, undefined, false)
  t.equal(c.lines.length, 1)
})

t.test('a logger it cannot mirror logs through pino', async t => {
  const c = capture()
  const log = pino({ mixin: () => ({ extra: 1 }) }, c.destination)
  accessLineWriter(log)('GET', '/x', 200, 1, undefined, undefined, false)
  t.equal(c.lines.length, 1)
  t.match(JSON.parse(c.lines[0]!), { extra: 1, method: 'GET', route: '/x', status: 200, us: 1, msg: 'request' })
})
