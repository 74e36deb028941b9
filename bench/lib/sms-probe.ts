// Scenario 3's far side: the fake Telnyx API the service forwards SMS to (test/support/fake-telnyx.ts),
// and a probe that measures the forwarding delay — from posting a signed `message.received`
// callback to the forwarded `messages.send` arriving here. It behaves as the provider does: a 503
// (the service could not hand the forward over within its budget) is retried after its
// Retry-After, and the delay of a message counts from the attempt that was accepted. Sender and receiver share this process
// and its clock. It also counts every forward, the forwarding throughput under wrk's load.
//
// Started before the service (its URL goes into TELNYX_BASE_URL); prints `listening <port>`.
// Then, on stdin: `go {"url":…,"seconds":…,"rate":…,"pairs":[[from,to],…]}` runs the probe and
// prints `PROBEJSON {...}`; `quit` exits.
import { createPrivateKey } from 'node:crypto'
import { createInterface } from 'node:readline'
import { CallbackDriver } from '../../test/support/callback-driver.js'
import { FakeTelnyx } from '../../test/support/fake-telnyx.js'

interface Go { url: string; seconds: number; settleSeconds: number; rate: number; pairs: Array<[string, string]>; publicKeyBase64: string; privateKeyPem: string }

const sent = new Map<number, number>()
const delays: number[] = []
let forwards = 0
let counting = false

const fake = await FakeTelnyx.start()
fake.setBehaviour(req => {
  const now = performance.now()
  // The fake keeps every request for tests; here that would grow without bound.
  fake.requests.length = 0
  if (!counting) return undefined
  forwards++
  const text = (req.body as { text?: unknown } | undefined)?.text
  if (typeof text === 'string' && text.startsWith('probe ')) {
    const at = sent.get(Number(text.slice(6)))
    if (at !== undefined) delays.push(now - at)
  }
  return undefined
})
console.log(`listening ${new URL(fake.baseURL).port}`)

const q = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? Number.NaN

async function probe(g: Go): Promise<void> {
  const driver = new CallbackDriver({
    baseUrl: g.url, mode: 'telnyx-ed25519',
    keyPair: { publicKeyBase64: g.publicKeyBase64, privateKey: createPrivateKey(g.privateKeyPem) },
  })
  sent.clear()
  delays.length = 0
  forwards = 0
  counting = true
  const answers: number[] = []
  let bad = 0
  let refused = 0
  const t0 = performance.now()
  const interval = 1000 / g.rate
  const inflight: Promise<void>[] = []
  for (let seq = 0; performance.now() - t0 < g.seconds * 1000; seq++) {
    const due = t0 + seq * interval
    const wait = due - performance.now()
    if (wait > 0) await new Promise(r => setTimeout(r, wait))
    const [from, to] = g.pairs[seq % g.pairs.length]!
    const messageId = `probe-${Date.now()}-${seq}`
    const attempt = async (): Promise<void> => {
      const at = performance.now()
      sent.set(seq, at)
      const res = await driver.smsReceived({ from, to, text: `probe ${seq}`, messageId })
      const body = await res.text()
      answers.push(performance.now() - at)
      if (res.status === 503) {
        refused++
        await new Promise(r => setTimeout(r, 1000 * Number(res.headers.get('retry-after') ?? 5)))
        return attempt()
      }
      if (res.status !== 200 || !body.includes('"ok":true')) bad++
    }
    inflight.push(attempt().catch(() => { bad++ }))
  }
  const windowS = (performance.now() - t0) / 1000
  const forwardsInWindow = forwards
  await Promise.all(inflight)
  // An accepted message was handed to the provider before its answer; the fake may still be
  // reading the last requests: give them a moment. What has not arrived by then counts as not
  // forwarded.
  const settle = performance.now()
  while (delays.length < sent.size && performance.now() - settle < g.settleSeconds * 1000) await new Promise(r => setTimeout(r, 20))
  counting = false
  delays.sort((a, b) => a - b)
  answers.sort((a, b) => a - b)
  console.log('PROBEJSON ' + JSON.stringify({
    probes: sent.size, forwarded: delays.length, bad, refused, windowS,
    forwardsPerS: forwardsInWindow / windowS,
    delayMs: { p50: q(delays, 0.5), p90: q(delays, 0.9), p99: q(delays, 0.99), p999: q(delays, 0.999), max: delays.at(-1) ?? Number.NaN },
    answerMs: { p50: q(answers, 0.5), p99: q(answers, 0.99) },
  }))
}

for await (const line of createInterface({ input: process.stdin })) {
  if (line.startsWith('go ')) await probe(JSON.parse(line.slice(3)) as Go)
  else if (line === 'quit') break
}
await fake.close()
process.exit(0)
