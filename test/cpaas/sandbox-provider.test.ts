// DECISIONS 1: the sandbox sends nothing anywhere, returns a sandbox-<uuid> id, keeps no copy.
import t from 'tap'
import { SandboxProvider } from '../../gateway/cpaas/sandbox-provider.js'

t.test('returns distinct sandbox ids and keeps only a count', async t => {
  const p = new SandboxProvider()
  const a = await p.sendSms({ from: '+12025550100', to: '+12025550142', text: 'hello' })
  const b = await p.sendSms({ from: '+12025550100', to: '+12025550142', text: 'hello' })
  t.match(a.providerMessageId, /^sandbox-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
  t.not(a.providerMessageId, b.providerMessageId)
  t.equal(p.sentCount, 2)
  t.equal(p.name, 'sandbox')
  t.notMatch(JSON.stringify(p), /\+1202|hello/, 'no numbers or text retained')
  t.equal(new SandboxProvider('sandbox-2').name, 'sandbox-2')
})
