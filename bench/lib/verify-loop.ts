// Baseline of scenario 2: how many Ed25519 signatures one core verifies per second, on the same
// kind of payload as a Telnyx voice callback (`"<timestamp>|<form body>"`). The public KeyObject
// is created once, as the service's verifier does; nothing else happens in the loop.
//
//   node --import tsx bench/lib/verify-loop.ts SECONDS
// Prints `VERIFYJSON {"verifies":…,"seconds":…}`.
import { generateKeyPairSync, sign, verify } from 'node:crypto'
import { encodeForm } from '../../api/cpaas/form.js'
import { agentOf, proxyOf } from '../baselines/route-table.js'

const seconds = Number(process.argv[2] ?? 5)
const { publicKey, privateKey } = generateKeyPairSync('ed25519')
const ts = String(Math.floor(Date.now() / 1000))
const payloads: Array<{ data: Buffer; sig: Buffer }> = []
for (let k = 0; k < 1_024; k++) {
  const body = encodeForm({ AccountSid: 'fake-account', CallSid: `v3:bench-${k}`, From: agentOf(k), To: proxyOf(k, 100), CallStatus: 'ringing', Direction: 'inbound' })
  const data = Buffer.concat([Buffer.from(ts + '|', 'latin1'), Buffer.from(body)])
  payloads.push({ data, sig: sign(null, data, privateKey) })
}

let n = 0
let ok = 0
const deadline = performance.now() + seconds * 1000
const t0 = performance.now()
while (performance.now() < deadline) {
  // Check the clock every 64 verifies: a verify costs tens of microseconds, the clock far less.
  for (let j = 0; j < 64; j++) {
    const p = payloads[n++ & 1023]!
    if (verify(null, p.data, publicKey, p.sig)) ok++
  }
}
const elapsed = (performance.now() - t0) / 1000
if (ok !== n) throw new Error(`${n - ok} signatures failed to verify`)
console.log('VERIFYJSON ' + JSON.stringify({ verifies: n, seconds: elapsed }))
