// Child process of test/cpaas/sandbox-provider.test.ts: sends one message of unique numbers and
// text through a SandboxProvider and searches the whole live heap for them (a heap snapshot is
// taken after a full collection, and sees #private fields, closures and module state alike, which
// JSON.stringify never shows). Its own process, so the heap to search is a few MB, not the test
// runner's. Prints `{ kept: boolean[], sent: boolean[] }`: `kept` is a control, a subclass keeping
// the message in a #private field, which the search must find or its silence proves nothing.
import { randomBytes, randomInt } from 'node:crypto'
import { getHeapSnapshot } from 'node:v8'
import { SandboxProvider } from '../../api/cpaas/sandbox-provider.js'
import type { SmsMessage } from '../../api/cpaas/provider.js'

class Keeping extends SandboxProvider {
  readonly #kept: SmsMessage[] = []
  override async sendSms(m: SmsMessage) {
    this.#kept.push(m)
    return super.sendSms(m)
  }
}

/** Sends one message whose numbers and text exist nowhere else; returns them as bytes, so what
 * this process holds to search with is not a string the provider was given. */
async function sendUnique(p: SandboxProvider): Promise<Buffer[]> {
  const text = `secret ${randomBytes(12).toString('hex')}`
  const from = `+1202${randomInt(1e6, 1e7 - 1)}`
  const to = `+1416${randomInt(1e6, 1e7 - 1)}`
  await p.sendSms({ from, to, text })
  return [text, from, to].map(v => Buffer.from(v))
}

const keeping = new Keeping()
const kept = await sendUnique(keeping)
const sandbox = new SandboxProvider()
const sent = await sendUnique(sandbox)

const chunks: Buffer[] = []
for await (const c of getHeapSnapshot()) chunks.push(Buffer.isBuffer(c) ? c : Buffer.from(String(c)))
const heap = Buffer.concat(chunks)

process.stdout.write(JSON.stringify({
  kept: kept.map(b => heap.includes(b)),
  sent: sent.map(b => heap.includes(b)),
  alive: keeping.sentCount + sandbox.sentCount, // both providers reachable while the heap was taken
}))
