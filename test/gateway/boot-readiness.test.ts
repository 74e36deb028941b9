// The service listens only once the engine holds every live session. A client hammers
// the port from before startService is called, alternating GET /v1/health and an inbound voice
// callback for a random live session: from the very first answer on, every call must be bridged
// to its session's other party. A listener that came up while sessions were still loading would
// answer some of them with a dead line (or a health 200 for an engine that cannot route yet).
import t from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import { sql } from 'slonik'
import type { E164 } from '../../engine/types.js'
import { loadConfig } from '../../gateway/config.js'
import { startService } from '../../gateway/service.js'
import { bulkInsertSessions, type BulkSessionRow } from '../../sql/sessions.js'
import { testDatabase } from '../support/db.js'
import { freePort } from '../support/pg-cluster.js'
import { addNumbers, addTenant, cipher, hashParty, phoneKey, proxy, record, T0 } from '../sql/fixtures.js'

const N = 20_000
const agentOf = (i: number) => `+1303${1_000_000 + i}` as E164
const customerOf = (i: number) => `+1404${1_000_000 + i}` as E164

t.test('nothing answers before every live session routes', async t => {
  const db = await testDatabase(t)
  await addNumbers(db.pool, 100) // the default NUMBER_POOL, +12025550100-199
  const tenants = [await addTenant(db.pool, 'ENTERPRISE'), await addTenant(db.pool, 'ENTERPRISE')]
  const now = Date.now()
  const rows: BulkSessionRow[] = []
  for (let i = 0; i < N; i++) {
    const tenant = tenants[i % 100 < 50 ? 0 : 1]! // a proxy belongs to one tenant (contract D4)
    const rec = record(tenant, { proxy: proxy(i % 100), agent: agentOf(i), customer: customerOf(i), at: T0 })
    rec.expiresAt = now + 86_400_000
    rows.push({
      rec, agentHash: hashParty(tenant.salt, rec.agentPhone), customerHash: hashParty(tenant.salt, rec.customerPhone),
      agentEnc: cipher.encrypt(rec.agentPhone), customerEnc: cipher.encrypt(rec.customerPhone),
    })
  }
  await bulkInsertSessions(db.pool, rows)
  t.equal(await db.pool.oneFirst(sql.unsafe`SELECT count(*) FROM sessions WHERE state = 'ACTIVE'`), N)

  const port = await freePort()
  const dataDir = mkdtempSync(join(tmpdir(), 'maskline-boot-'))
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
  const config = loadConfig({
    PORT: String(port), HOST: '127.0.0.1', DATA_DIR: dataDir, LOG_LEVEL: 'info', PHONE_KEY: phoneKey.toString('base64'),
    JWT_SECRET: 'x'.repeat(64), CPAAS_PROVIDER: 'sandbox', CPAAS_SIGNATURE: 'none',
  })
  const base = `http://127.0.0.1:${port}`

  let stop = false
  const answers: Array<{ kind: 'health' | 'voice'; status: number; routed?: boolean }> = []
  let refused = 0
  const poll = (async () => {
    for (let k = 0; !stop; k++) {
      const i = Math.floor(Math.random() * N)
      try {
        if (k % 2 === 0) {
          const res = await fetch(`${base}/v1/health`)
          answers.push({ kind: 'health', status: res.status })
          await res.arrayBuffer()
        } else {
          const body = new URLSearchParams({ AccountSid: 'boot', CallSid: `boot-${k}`, From: agentOf(i), To: proxy(i % 100), CallStatus: 'ringing', Direction: 'inbound' })
          const res = await fetch(`${base}/v1/webhooks/cpaas/voice`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body })
          answers.push({ kind: 'voice', status: res.status, routed: (await res.text()).includes(`>${customerOf(i)}</Number>`) })
        }
      } catch {
        refused++ // nothing listening yet
        await new Promise(resolve => setTimeout(resolve, 1))
      }
    }
  })()

  const logs: string[] = []
  const svc = await startService({ config, db, logDestination: new Writable({ write(c, _e, cb) { logs.push(String(c)); cb() } }) })
  t.teardown(() => svc.close())
  t.equal(svc.boot.liveSessions, N)
  // Keep going a little after startService: answers from then on are the control.
  const until = answers.filter(a => a.kind === 'voice').length + 20
  while (answers.filter(a => a.kind === 'voice').length < until) await new Promise(resolve => setTimeout(resolve, 5))
  stop = true
  await poll

  t.ok(refused > 0, `the client was refused while the service booted (${refused} times)`)
  const voice = answers.filter(a => a.kind === 'voice')
  t.ok(voice.length >= 20)
  t.same(voice.filter(a => !a.routed).length, 0, 'every call answered, from the first one on, is bridged to its session')
  t.same(answers.filter(a => a.kind === 'health' && a.status !== 200), [], 'health answers 200 once listening')
  const boot = logs.map(l => JSON.parse(l) as { msg: string; liveSessions?: number; ms?: Record<string, number> }).find(l => l.msg === 'boot')
  t.match(boot, { liveSessions: N, ms: { sessions: Number, gc: Number } }, "the 'boot' line gives the load's phases, and the collection of its garbage")
})
