// The quickstart, run as written (style 12): the fenced `sh` blocks of its section, in order, in
// one bash shell, against a fresh service started as `npm start` starts it (on this suite's
// backend: the embedded default on the embedded run). Only the base URL is changed, to the
// service's port. Each step's output is checked, so a wrong route, field or answer in the doc
// fails here before a reader meets it.
import t, { type Test } from 'tap'
import { spawn } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { childData, startChild } from '../support/child-service.js'

/** Where the quickstart is read: the README's own section, which a new user follows. */
const QUICKSTART_DOCS = ['README.md']
const SECTION = '## Quickstart'
/** The base URL the doc uses; replaced by the test service's. */
const DOC_BASE = 'http://localhost:8080'
const RUN_TIMEOUT_MS = 60_000
const AGENT = '+12125550101'
const CUSTOMER = '+12125550102'

const REPO = fileURLToPath(new URL('../../', import.meta.url))

/** The text from `heading` to the next heading of the same level, or null. */
function sectionOf(markdown: string, heading: string): string | null {
  const lines = markdown.split('\n')
  const start = lines.findIndex(l => l.trim() === heading)
  if (start < 0) return null
  const level = heading.split(' ')[0]!
  const end = lines.findIndex((l, i) => i > start && l.startsWith(level + ' '))
  return lines.slice(start, end < 0 ? undefined : end).join('\n')
}

/** The fenced blocks whose info string is exactly `sh` (`console` blocks are for reading only). */
function shBlocks(section: string): string[] {
  return [...section.matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map(m => m[1]!)
}

function quickstart(): { doc: string; blocks: string[] } {
  for (const doc of QUICKSTART_DOCS) {
    const path = join(REPO, doc)
    const section = existsSync(path) ? sectionOf(readFileSync(path, 'utf8'), SECTION) : null
    if (section) return { doc, blocks: shBlocks(section) }
  }
  throw new Error(`no "${SECTION}" section in ${QUICKSTART_DOCS.join(' or ')}`)
}

const MARK = (i: number) => `@@@ end of block ${i} @@@`

/** Runs the blocks in one bash (stderr into stdout); resolves with each block's output. */
function runBlocks(blocks: string[], cwd: string): Promise<{ code: number | null; timedOut: boolean; outputs: string[]; all: string }> {
  const script = ['exec 2>&1', 'set -euo pipefail', ...blocks.flatMap((b, i) => [b, `printf '\\n%s\\n' '${MARK(i)}'`])].join('\n')
  // Only what a user's shell would have: tap's loader options must not reach the doc's `node`.
  const env = { PATH: process.env.PATH ?? '', HOME: cwd, LANG: 'C.UTF-8' }
  return new Promise((resolve, reject) => {
    let timedOut = false
    // Its own process group, so a block left hanging (and the watcher it started) can be ended.
    const bash = spawn('bash', ['-c', script], { cwd, env, detached: true, stdio: ['ignore', 'pipe', 'inherit'] })
    let all = ''
    bash.stdout.setEncoding('utf8')
    bash.stdout.on('data', (d: string) => { all += d })
    const killGroup = () => { try { process.kill(-bash.pid!, 'SIGKILL') } catch { /* already gone */ } }
    // A step that waits forever (the stream watcher, when an event never comes) is ended, and the
    // steps' checks then say which one went wrong.
    const timer = setTimeout(() => { timedOut = true; killGroup() }, RUN_TIMEOUT_MS)
    bash.on('error', reject)
    // The watcher holds the pipe open after bash exits early: end it, then read to the end.
    bash.on('exit', killGroup)
    bash.on('close', code => {
      clearTimeout(timer)
      const outputs: string[] = []
      let rest = all
      blocks.forEach((_, i) => {
        const at = rest.indexOf(MARK(i))
        outputs.push(at < 0 ? rest : rest.slice(0, at))
        rest = at < 0 ? '' : rest.slice(at + MARK(i).length)
      })
      resolve({ code, timedOut, outputs, all })
    })
  })
}

/** One step of the quickstart: the block that does it (found by what it runs), and what it must print. */
interface Step { name: string; block: RegExp; check(t: Test, out: string): void }

const jsonLines = (out: string) => out.split('\n').filter(l => l.startsWith('{')).map(l => JSON.parse(l) as Record<string, any>)
const lastJson = (out: string) => jsonLines(out).at(-1) ?? {}

const STEPS: Step[] = [
  { name: 'the service answers', block: /\/v1\/health/, check: (t, out) => t.match(lastJson(out), { status: 'healthy' }) },
  {
    name: 'signup gives an API key and secret', block: /\/v1\/auth\/signup/,
    check: (t, out) => t.match(lastJson(out), { apiKey: /^rk_live_[0-9a-f]{48}$/, apiSecret: /^rs_[0-9a-f]{64}$/, user: { role: 'OWNER' } }),
  },
  { name: 'the key is traded for a token', block: /\/v1\/auth\/token/, check: (t, out) => t.match(out, /^token: eyJ[\w-]{21}…$/m) },
  { name: 'the stream is open', block: /\/v1\/stream/, check: (t, out) => t.match(out, /^stream: open$/m) },
  {
    name: 'a session is created', block: /agentPhone/,
    check: (t, out) => {
      t.match(out, /^HTTP 201$/m)
      t.match(lastJson(out), { state: 'ACTIVE', proxyNumber: /^\+1202555\d{4}$/ })
      t.notMatch(out, AGENT, 'no party number in the answer')
    },
  },
  {
    name: 'the inbound call is answered with a Dial to the customer', block: /\/v1\/webhooks\/cpaas\/voice /,
    check: (t, out) => t.match(out, new RegExp(`<Dial callerId="\\+1202555\\d{4}"[^>]*action="[^"]*dial-status\\?callId=[0-9a-f-]{36}"><Number [^>]*>\\${CUSTOMER}</Number></Dial>`)),
  },
  { name: 'the dial status is answered with a hangup', block: /dial-status/, check: (t, out) => t.match(out, '<Response><Hangup/></Response>') },
  {
    name: 'the stream showed the session and the call', block: /cat <&3/,
    check: (t, out) => {
      const events = jsonLines(out)
      t.same(events.map(e => e.type), ['session.created', 'session.activated', 'call.incoming', 'call.ended'])
      t.match(events.at(-1), { data: { status: 'COMPLETED', durationSeconds: 42, direction: 'A_TO_B' } })
      t.notMatch(out, /\+1212555010[12]/, 'no party number in an event')
    },
  },
  {
    name: 'the call record is completed', block: /\/calls/,
    check: (t, out) => t.match(lastJson(out), { data: [{ status: 'COMPLETED', direction: 'A_TO_B', durationSeconds: 42 }], pagination: { count: 1 } }),
  },
]

t.test('the quickstart runs as written', async t => {
  const { doc, blocks } = quickstart()
  t.ok(blocks.some(b => b.includes(DOC_BASE)), `${doc} sets its base URL to ${DOC_BASE}`)
  const data = await childData(t)
  // As `npm start` with nothing configured, but on a free port and without the metrics listener.
  const svc = await startChild(t, data, { env: { WEBHOOK_ALLOW_INSECURE: 'false', METRICS_PORT: 'off' } })
  const cwd = mkdtempSync(join(tmpdir(), 'maskline-quickstart-'))
  t.teardown(() => rmSync(cwd, { recursive: true, force: true }))

  const run = await runBlocks(blocks.map(b => b.replaceAll(DOC_BASE, svc.url)), cwd)
  t.notOk(run.timedOut, `${doc} finished within ${RUN_TIMEOUT_MS} ms`)
  t.equal(run.code, 0, `every block of ${doc} ran (bash -euo pipefail)`)
  if (run.code !== 0) t.comment(`its output:\n${run.all.slice(-3_000)}`)
  for (const step of STEPS) {
    const i = blocks.findIndex(b => step.block.test(b))
    t.not(i, -1, `${doc} has a step where ${step.name}`)
    if (i >= 0) t.test(`${step.name} (${doc}, block ${i + 1})`, async t => step.check(t, run.outputs[i]!))
  }
})
