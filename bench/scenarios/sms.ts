// Scenario 3: inbound SMS (POST /v1/webhooks/cpaas/sms, Telnyx `message.received`, Ed25519-signed)
// forwarded to the other party through the provider, here a fake Telnyx on loopback
// (bench/lib/sms-probe.ts). wrk measures the `{ok:true}` answer; the probe, running during the
// same seconds, measures the forwarding delay, and the fake counts forwards per second.
import { fileURLToPath } from 'node:url'
import { join } from 'node:path'
import { startChild, type Child } from '../lib/proc.js'
import { agentOf, proxyOf } from '../lib/population.js'
import { writeSmsFile } from '../lib/requests.js'
import { progress } from '../lib/results.js'
import { runLoad } from '../lib/loadgen.js'
import { loaded, requestCount, settle, type Ctx } from './common.js'
import { preflight } from './preflight.js'
import type { Service } from './service.js'

export interface SmsProbe { child: Child; baseUrl: string }

/** The fake provider must exist before the service boots: its URL is TELNYX_BASE_URL. */
export async function startSmsProbe(ctx: Ctx): Promise<SmsProbe> {
  const child = startChild({
    name: 'fake Telnyx + SMS probe', cmd: process.execPath, args: ['--import', 'tsx', fileURLToPath(new URL('../lib/sms-probe.ts', import.meta.url))],
    core: ctx.pin.loadCore, pin: ctx.pin,
  })
  const port = await child.waitFor(l => (l.startsWith('listening ') ? Number(l.slice(10)) : undefined), 60_000, 'its listening line')
  return { child, baseUrl: `http://127.0.0.1:${port}/v2` }
}

interface ProbeResult {
  probes: number; forwarded: number; bad: number; refused: number; windowS: number; forwardsPerS: number
  /** null when nothing was forwarded (JSON has no NaN). */
  delayMs: { p50: number | null; p90: number | null; p99: number | null; p999: number | null; max: number | null }
}

const us = (ms: number | null) => (ms === null ? Number.NaN : ms * 1000)

export async function smsScenario(ctx: Ctx, svc: Service, probe: SmsProbe): Promise<void> {
  const signing = { mode: 'telnyx-ed25519' as const, keyPair: ctx.keys.telnyx, hmacSecret: ctx.keys.hmacSecret, publicBaseUrl: svc.url }
  const cap = ctx.opts.smoke ? 1_000 : 100_000
  const distinct = requestCount(ctx.opts.duration, 15_000, cap)
  const base = join(ctx.work, `sms-${svc.port}`)
  const t0 = Date.now()
  writeSmsFile(`${base}.warm.req`, requestCount(ctx.opts.warmup, 15_000, cap / 3, 100), ctx.pop, signing, `w${svc.port}`, 1 << 20)
  writeSmsFile(`${base}.req`, distinct, ctx.pop, signing, `m${svc.port}`)
  progress(`SMS requests: ${distinct.toLocaleString('en')} + warm-up, signed in ${Date.now() - t0} ms`)
  await preflight(ctx, 'sms', svc.url, `${base}.warm.req`, { status: 200, body: /"ok":\s*true/ })

  if (ctx.opts.warmup > 0) {
    await settle(ctx, 'maskline SMS')
    progress(`maskline SMS: warm-up ${ctx.opts.warmup} s`)
    await runLoad(ctx.gen, ctx.pin, { url: svc.url, file: `${base}.warm.req`, connections: ctx.opts.connections, durationS: ctx.opts.warmup })
  }
  const pairs: Array<[string, string]> = []
  for (let k = 0; k < 200; k++) {
    const i = (k * 7_919) % ctx.pop.sessions
    pairs.push([agentOf(i), proxyOf(i, ctx.pop.proxies)])
  }
  const rate = ctx.opts.smoke ? 50 : 100
  await settle(ctx, 'maskline SMS callback')
  const result = probe.child.waitFor(l => (l.startsWith('PROBEJSON ') ? JSON.parse(l.slice(10)) as ProbeResult : undefined),
    (ctx.opts.duration + 60) * 1000, 'the probe result')
  probe.child.proc.stdin!.write('go ' + JSON.stringify({
    url: svc.url, seconds: ctx.opts.duration, settleSeconds: ctx.opts.smoke ? 10 : 30, rate, pairs,
    publicKeyBase64: ctx.keys.telnyx.publicKeyBase64, privateKeyPem: ctx.keys.telnyxPrivatePem,
  }) + '\n')
  progress(`forwarding probe: ${rate} signed SMS/s alongside the load`)
  // The warm-up ran above: this call measures only.
  await loaded(ctx, { name: 'sms', label: 'maskline SMS callback → {ok:true}', url: svc.url, file: `${base}.req`, distinct, settled: true })
  const p = await result
  const r = ctx.results
  r.figure('sms.forwards_per_s', p.forwardsPerS, 'msgs/s')
  r.figure('sms.forward_delay.p50', us(p.delayMs.p50), 'us')
  r.figure('sms.forward_delay.p99', us(p.delayMs.p99), 'us')
  if (p.forwarded > 0) r.latency({ label: 'SMS forwarding delay (probe)', p50: us(p.delayMs.p50), p90: us(p.delayMs.p90), p99: us(p.delayMs.p99), p999: us(p.delayMs.p999) })
  if (p.forwarded < p.probes || p.bad > 0) {
    r.note(`sms: ${p.forwarded} of ${p.probes} probe messages were forwarded by the end of the run + ${ctx.opts.smoke ? 10 : 30} s; ${p.bad} probe callbacks were not answered {ok:true}`)
  }
  r.ratio('sms.vs_hello', 'sms.rps', 'baseline.hello.rps')
  const p99 = r.get('sms.p99')
  r.target('3. SMS', '{ok:true} answer p99 within 2 s (contract D5)', p99 === undefined ? null : p99 <= 2_000_000,
    p99 === undefined ? 'not measured' : `p99 ${(p99 / 1000).toFixed(1)} ms`)
  r.target('3. SMS', 'every probe message forwarded (503s retried after Retry-After, as the provider does)', p.probes > 0 ? p.forwarded === p.probes : null,
    `${p.forwarded} of ${p.probes}; ${p.refused} answers were 503`)
  r.target('3. SMS', 'forward delay p99 of accepted messages ≤ 1 s', p.forwarded > 0 && p.delayMs.p99 !== null ? p.delayMs.p99 <= 1_000 : null,
    `delay p99 ${p.delayMs.p99 === null ? '–' : `${p.delayMs.p99.toFixed(1)} ms`}`)
}
