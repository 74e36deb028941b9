// contract D1: the sandbox sends nothing anywhere, returns a sandbox-<uuid> id, keeps no copy.
import t from 'tap'
import { execFile } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { SandboxProvider } from '../../api/cpaas/sandbox-provider.js'
import { NO_CHILD_COVERAGE } from '../support/child-service.js'

const run = promisify(execFile)

t.test('returns distinct sandbox ids and keeps only a count', async t => {
  const p = new SandboxProvider()
  const a = await p.sendSms({ from: '+12025550100', to: '+12025550142', text: 'hello' })
  const b = await p.sendSms({ from: '+12025550100', to: '+12025550142', text: 'hello' })
  t.match(a.providerMessageId, /^sandbox-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
  t.not(a.providerMessageId, b.providerMessageId)
  t.equal(p.sentCount, 2)
  t.equal(p.name, 'sandbox')
  t.equal(new SandboxProvider('sandbox-2').name, 'sandbox-2')
})

// JSON.stringify shows no #private field: look in the heap itself, where a copy kept anywhere
// (a private field, a closure, a module-level cache) would be found.
t.test('keeps no copy of the numbers or the text, anywhere in the heap', async t => {
  const probe = fileURLToPath(new URL('../support/sandbox-heap-probe.ts', import.meta.url))
  const { stdout } = await run(process.execPath, ['--import', 'tsx', probe], { timeout: 60_000, env: { ...process.env, ...NO_CHILD_COVERAGE } })
  const found = JSON.parse(stdout) as { kept: boolean[]; sent: boolean[]; alive: number }
  t.equal(found.alive, 2, 'both providers alive while the heap was searched')
  t.same(found.kept, [true, true, true], 'the search finds a copy held in a #private field')
  t.same(found.sent, [false, false, false], 'the sandbox kept neither number nor the text')
})
