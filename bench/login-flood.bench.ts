// Question (contract 8.4): does a flood of dashboard logins slow the routed voice callback? Password
// hashing (scrypt, N=2^17: 128 MiB and a few hundred ms of a core each) is bounded in
// api/auth/passwords.ts to cores-1 at once and a short queue, past which logins get 503 at once;
// the event loop keeps a core, so callbacks should not notice. This measures it.
//
// The service runs as a child process (node --import tsx gateway/main.ts, embedded PGlite, sandbox
// provider, logging at info), as `npm start` runs it. The callback load is the same routed voice
// fetch in both phases, paced: first alone, then alongside a login flood from 250 loopback
// addresses (127.0.0.2-251; the per-address throttle counts each separately, so the flood reaches
// the hash queue). The in-process figure is the service's own access log (`us`, handler start to
// answer written), as bench/scenarios/voice.ts reads it.
//
//   node --import tsx bench/login-flood.bench.ts     (BENCH_SECONDS=8 BENCH_RATE=400 BENCH_FLOOD=64)
//
// A second phase (`signups`) asks whether a signup flood delays sign-in: 40 loops, each from its
// own loopback address, post signups back to back (each would cost a password hash) while the
// owner logs in again and again (from a new address each time: the per-address login throttle
// is not what is measured). Checks of existing accounts go before signups in
// api/auth/hash-queue.ts, and a signup that would wait past SIGNUP_MAX_WAIT_MS is refused at once.
// Reported: the login's p50/p99 (target: p99 ≤ 1.5 s, one hash plus scheduling) and the flood's
// answers by status, with how many refusals lacked Retry-After.
//
//   node --import tsx bench/login-flood.bench.ts [callbacks] [signups]    (default: both phases)
//
// Output: `bench: <name> <value> <unit>` lines and `# target …` lines; exit 1 when a target is
// not met (callbacks: p99 under the login flood under 1 ms; signups: login p99 ≤ 1.5 s).
import { spawn } from 'node:child_process'
import { mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs'
import { Agent, request, type IncomingMessage } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { encodeForm } from '../api/cpaas/form.js'
import { handlerLatency } from './lib/service-log.js'
import { freePort, rssOf, sleep } from './lib/proc.js'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const SECONDS = Number(process.env.BENCH_SECONDS ?? 8)
const RATE = Number(process.env.BENCH_RATE ?? 400)
const FLOOD = Number(process.env.BENCH_FLOOD ?? 64)
const VOICE = '/v1/webhooks/cpaas/voice'
const PHASES = process.argv.slice(2).length ? process.argv.slice(2) : ['callbacks', 'signups']
const SIGNUP_FLOOD = Number(process.env.BENCH_SIGNUP_FLOOD ?? 40)
/** Issue target: a legitimate login during the signup flood, p99 (ms). */
const LOGIN_P99_MS = 1_500

const out = (name: string, value: number, unit: string) => console.log(`bench: ${name} ${Math.round(value * 10) / 10} ${unit}`)

interface Answer { status: number; body: string; retryAfter?: string | undefined }

function call(agent: Agent, port: number, method: string, path: string, body: string, headers: Record<string, string> = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method, path, agent, headers: { 'content-length': Buffer.byteLength(body), ...headers } }, (res: IncomingMessage) => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', d => { text += d })
      res.on('end', () => resolve({ status: res.statusCode!, body: text, retryAfter: res.headers['retry-after'] }))
    })
    req.on('error', reject)
    req.end(body)
  })
}

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'maskline-flood-'))
  const port = await freePort()
  const logFile = join(dir, 'service.log')
  const fd = openSync(logFile, 'a')
  const child = spawn(process.execPath, ['--import', 'tsx', 'gateway/main.ts'], {
    cwd: ROOT, stdio: ['ignore', fd, fd],
    env: { ...process.env, PORT: String(port), HOST: '127.0.0.1', DATA_DIR: dir, LOG_LEVEL: 'info', CPAAS_PROVIDER: 'sandbox', DATABASE_URL: '', REDIS_URL: '' },
  })
  const stop = () => { if (child.exitCode === null) child.kill('SIGTERM') }
  process.on('exit', stop)
  try {
    for (let i = 0; !readFileSync(logFile, 'utf8').includes('"listening"'); i++) {
      if (i > 600 || child.exitCode !== null) throw new Error(`the service did not start:\n${readFileSync(logFile, 'utf8').slice(-2000)}`)
      await sleep(100)
    }
    const api = new Agent({ keepAlive: true, maxSockets: 8 })
    const json = { 'content-type': 'application/json' }
    const su = await call(api, port, 'POST', '/v1/auth/signup', JSON.stringify({ companyName: 'Flood Co', email: 'owner@flood.example', password: 'correct horse battery' }), json)
    if (su.status !== 201) throw new Error(`signup: ${su.status} ${su.body}`)
    const { accessToken } = JSON.parse(su.body) as { accessToken: string }
    const A = '+14155550101', B = '+14155550102'
    const s = await call(api, port, 'POST', '/v1/sessions', JSON.stringify({ agentPhone: A, customerPhone: B }), { ...json, authorization: `Bearer ${accessToken}` })
    if (s.status !== 201) throw new Error(`session: ${s.status} ${s.body}`)
    const proxy = (JSON.parse(s.body) as { proxyNumber: string }).proxyNumber
    const form = { 'content-type': 'application/x-www-form-urlencoded' }

    let sid = 0
    /** Routed voice fetches at RATE per second for `seconds`; client-side latencies in µs. */
    async function callbacks(seconds: number): Promise<{ from: number; to: number; client: number[]; bad: number }> {
      const agent = new Agent({ keepAlive: true, maxSockets: 16 })
      const client: number[] = []
      let bad = 0
      const from = Date.now()
      const pending: Promise<void>[] = []
      const total = Math.round(seconds * RATE)
      for (let i = 0; i < total; i++) {
        const due = from + (i * 1000) / RATE
        const wait = due - Date.now()
        if (wait > 1) await sleep(wait)
        const t0 = performance.now()
        const body = encodeForm({ CallSid: `CA-flood-${++sid}`, From: i % 2 ? A : B, To: proxy })
        pending.push(call(agent, port, 'POST', VOICE, body, form).then(r => {
          client.push((performance.now() - t0) * 1000)
          if (r.status !== 200 || !r.body.includes('<Dial')) bad++
        }, () => { bad++ }))
      }
      await Promise.all(pending)
      agent.destroy()
      return { from, to: Date.now(), client, bad }
    }
    const pct = (v: number[], p: number) => { const s = Float64Array.from(v).sort(); return s[Math.min(s.length - 1, Math.floor(p * s.length))] ?? NaN }

    /** The login flood against the routed voice callback (contract 8.4). */
    async function callbackPhase(): Promise<boolean> {
      await callbacks(1) // warm-up: JIT, first engine lookups
      const quiet = await callbacks(SECONDS)
      await sleep(300)
      const quietIn = handlerLatency(logFile, VOICE, quiet.from, quiet.to)

      const quietRss = rssOf(child.pid!)
      // The flood: FLOOD loops, each on its own loopback address in turn, until the callbacks end.
      let flooding = true
      const logins = new Map<number, number>()
      let peakRss = 0
      const rssTimer = setInterval(() => { const r = rssOf(child.pid!); if (r > peakRss) peakRss = r }, 200)
      const agents = Array.from({ length: 250 }, (_, i) => new Agent({ keepAlive: true, maxSockets: 4, localAddress: `127.0.0.${i + 2}` }))
      const floods = Array.from({ length: FLOOD }, async (_, k) => {
        for (let n = 0; flooding; n++) {
          const agent = agents[(k * 7 + n) % agents.length]!
          const r = await call(agent, port, 'POST', '/v1/auth/dashboard/login', JSON.stringify({ email: `guess-${k}-${n}@flood.example`, password: `guess-${n}` }), json)
            .catch(() => ({ status: 0, body: '' }))
          logins.set(r.status, (logins.get(r.status) ?? 0) + 1)
        }
      })
      await sleep(1_000) // the queue fills
      const loud = await callbacks(SECONDS)
      flooding = false
      await Promise.all(floods)
      clearInterval(rssTimer)
      await sleep(300)
      const loudIn = handlerLatency(logFile, VOICE, loud.from, loud.to)
      const ownerLogin = await call(api, port, 'POST', '/v1/auth/dashboard/login', JSON.stringify({ email: 'owner@flood.example', password: 'correct horse battery' }), json)

      out('login_flood.quiet.voice.in_process.p50', quietIn?.us.p50 ?? NaN, 'us')
      out('login_flood.quiet.voice.in_process.p99', quietIn?.us.p99 ?? NaN, 'us')
      out('login_flood.quiet.voice.client.p99', pct(quiet.client, 0.99), 'us')
      out('login_flood.flood.voice.in_process.p50', loudIn?.us.p50 ?? NaN, 'us')
      out('login_flood.flood.voice.in_process.p99', loudIn?.us.p99 ?? NaN, 'us')
      out('login_flood.flood.voice.in_process.p999', loudIn?.us.p999 ?? NaN, 'us')
      out('login_flood.flood.voice.client.p99', pct(loud.client, 0.99), 'us')
      out('login_flood.flood.voice.callbacks', loud.client.length, 'requests')
      out('login_flood.flood.voice.failed', quiet.bad + loud.bad, 'requests')
      for (const [status, n] of [...logins].sort((a, b) => a[0] - b[0])) out(`login_flood.flood.logins.${status}`, n, 'answers')
      out('login_flood.quiet.service_rss', quietRss / 2 ** 20, 'MiB')
      out('login_flood.flood.service_peak_rss', peakRss / 2 ** 20, 'MiB')
      out('login_flood.flood.service_rss_growth', (peakRss - quietRss) / 2 ** 20, 'MiB') // about one scrypt per hash at once
      out('login_flood.after.owner_login_status', ownerLogin.status, 'status')
      const p99 = loudIn?.us.p99 ?? Infinity
      console.log(`# target: routed voice callback p99 < 1 ms inside the process during a login flood: ${p99 < 1000 ? 'met' : 'NOT met'} (p99 ${p99} µs over ${loudIn?.count ?? 0} callbacks)`)
      for (const a of agents) a.destroy()
      return p99 < 1000 && quiet.bad + loud.bad === 0
    }

    /** A signup flood against a legitimate login: logins go first, the flood is refused with Retry-After. */
    async function signupPhase(): Promise<boolean> {
      let flooding = true
      const answers = new Map<number, number>()
      let noRetryAfter = 0
      const floodAgents = Array.from({ length: SIGNUP_FLOOD }, (_, k) => new Agent({ keepAlive: true, maxSockets: 1, localAddress: `127.0.1.${k + 1}` }))
      const floods = floodAgents.map(async (agent, k) => {
        for (let n = 0; flooding; n++) {
          const body = JSON.stringify({ companyName: `Signup flood ${k}-${n}`, email: `signup-${k}-${n}@flood.example`, password: 'correct horse battery' })
          const r = await call(agent, port, 'POST', '/v1/auth/signup', body, json).catch(() => ({ status: 0, body: '', retryAfter: undefined }))
          answers.set(r.status, (answers.get(r.status) ?? 0) + 1)
          if ((r.status === 429 || r.status === 503) && !r.retryAfter) noRetryAfter++
        }
      })
      await sleep(500) // the flood is on
      const owner = JSON.stringify({ email: 'owner@flood.example', password: 'correct horse battery' })
      const ms: number[] = []
      const bad: number[] = []
      for (const until = Date.now() + SECONDS * 1000; Date.now() < until;) {
        // From a new address each time: 5 logins a minute per address is not what is measured.
        const agent = new Agent({ keepAlive: false, localAddress: `127.0.2.${(ms.length % 250) + 1}` })
        const t0 = performance.now()
        const r = await call(agent, port, 'POST', '/v1/auth/dashboard/login', owner, json).catch(() => ({ status: 0, body: '' }))
        ms.push(performance.now() - t0)
        if (r.status !== 200) bad.push(r.status)
        agent.destroy()
        await sleep(100)
      }
      flooding = false
      await Promise.all(floods)
      for (const a of floodAgents) a.destroy()
      const p99 = pct(ms, 0.99)
      out('login_flood.signups.login.p50', pct(ms, 0.5), 'ms')
      out('login_flood.signups.login.p99', p99, 'ms')
      out('login_flood.signups.login.max', Math.max(...ms), 'ms')
      out('login_flood.signups.logins', ms.length, 'requests')
      out('login_flood.signups.login.failed', bad.length, 'requests')
      for (const [status, n] of [...answers].sort((x, y) => x[0] - y[0])) out(`login_flood.signups.flood.${status}`, n, 'answers')
      out('login_flood.signups.flood.refused_without_retry_after', noRetryAfter, 'answers')
      const met = p99 <= LOGIN_P99_MS && bad.length === 0
      console.log(`# target: dashboard login p99 ≤ ${LOGIN_P99_MS} ms during a flood of ${SIGNUP_FLOOD} concurrent signups from ${SIGNUP_FLOOD} addresses: ${met ? 'met' : 'NOT met'} (p99 ${Math.round(p99)} ms over ${ms.length} logins, ${bad.length} not 200)`)
      return met && noRetryAfter === 0
    }

    let ok = true
    if (PHASES.includes('callbacks')) ok = (await callbackPhase()) && ok
    if (PHASES.includes('signups')) ok = (await signupPhase()) && ok
    api.destroy()
    process.exitCode = ok ? 0 : 1
  } finally {
    stop()
    await new Promise(r => child.once('exit', r).once('error', r))
    rmSync(dir, { recursive: true, force: true })
  }
}

await main()
