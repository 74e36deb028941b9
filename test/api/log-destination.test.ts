// The service's stdout destination (api/log.ts createAppendDestination) appends lines
// and writes them joined: one write per 8 KiB, or after 100 ms; one write at a time; bounded (a
// stalled output drops lines past the cap, counts them and says so once it writes again); a
// synchronous flush at exit.
import t from 'tap'
import { closeSync, openSync, readFileSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createAppendDestination, createLogger } from '../../api/log.js'

type Cb = (err: NodeJS.ErrnoException | null, written: number) => void

/** A write call the test completes by hand. */
function manualWriter() {
  const calls: Array<{ text: string; done: Cb; len: number }> = []
  return {
    calls,
    writeFn: (_fd: number, buf: Buffer, cb: Cb) => { calls.push({ text: buf.toString(), done: cb, len: buf.length }) },
  }
}

t.test('lines are written joined once minLength is pending, one write at a time', async t => {
  const w = manualWriter()
  const d = createAppendDestination({ fd: -1, minLength: 100, intervalMs: 60_000, writeFn: w.writeFn })
  const line = (i: number) => `line ${String(i).padStart(2, '0')}`.padEnd(19, '.') + '\n' // 20 chars
  for (let i = 0; i < 7; i++) d.write(line(i))
  t.equal(w.calls.length, 1, 'one write once 100 chars were pending')
  t.equal(w.calls[0]!.text, [0, 1, 2, 3, 4].map(line).join(''), 'the five lines pending then, joined')
  for (let i = 7; i < 16; i++) d.write(line(i))
  t.equal(w.calls.length, 1, 'no second write while one is in flight')
  w.calls[0]!.done(null, w.calls[0]!.len)
  t.equal(w.calls.length, 2, 'what waited goes in the next write')
  t.equal(w.calls[1]!.text, [5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15].map(line).join(''))
  // A short write: the rest follows.
  w.calls[1]!.done(null, 10)
  t.equal(w.calls.length, 3)
  t.equal(w.calls[2]!.len, w.calls[1]!.len - 10)
})

t.test('the interval writes what is pending below minLength', async t => {
  const w = manualWriter()
  const d = createAppendDestination({ fd: -1, intervalMs: 20, writeFn: w.writeFn })
  d.write('one short line\n')
  t.equal(w.calls.length, 0)
  await new Promise(r => setTimeout(r, 60))
  t.equal(w.calls.length, 1)
  t.equal(w.calls[0]!.text, 'one short line\n')
})

t.test('bounded: past maxPending lines are dropped and counted, and the count is logged once the output moves', async t => {
  const w = manualWriter()
  const d = createAppendDestination({ fd: -1, minLength: 10, maxPending: 1_000, intervalMs: 60_000, writeFn: w.writeFn })
  const line = 'x'.repeat(99) + '\n'
  for (let i = 0; i < 100; i++) d.write(line) // the output is stalled: the first write never completes
  t.equal(w.calls.length, 1)
  t.ok(d.dropped > 80, `lines dropped (${d.dropped})`)
  t.ok(d.pending < 1_300, `memory stays bounded (${d.pending} chars)`)
  const dropped = d.dropped
  w.calls[0]!.done(null, w.calls[0]!.len)
  t.equal(w.calls.length, 2)
  const report = w.calls[1]!.text.split('\n').filter(Boolean).map(l => { try { return JSON.parse(l) as Record<string, unknown> } catch { return null } }).find(o => o?.['code'] === 'log-dropped')
  t.same({ level: report?.['level'], dropped: report?.['dropped'] }, { level: 40, dropped }, 'one warning line with the count')
})

t.test('flushSync writes everything pending, through pino', async t => {
  const dir = mkdtempSync(join(tmpdir(), 'maskline-log-'))
  t.teardown(() => rmSync(dir, { recursive: true, force: true }))
  const file = join(dir, 'out.log')
  const fd = openSync(file, 'w')
  const d = createAppendDestination({ fd, intervalMs: 60_000 })
  const log = createLogger({ destination: d })
  log.info({ route: '/v1/sessions/:id', status: 200, agentPhone: '+14155550100' }, 'request')
  log.info({ n: 2 }, 'second')
  t.equal(readFileSync(file, 'utf8'), '', 'nothing written below minLength')
  d.flushSync()
  closeSync(fd)
  const lines = readFileSync(file, 'utf8').trim().split('\n').map(l => JSON.parse(l) as Record<string, unknown>)
  t.same(lines.map(l => l['msg']), ['request', 'second'])
  t.equal(lines[0]!['agentPhone'], '[redacted]', 'the scrub still applies')
})
