// Building the service graph loads nothing and serves nothing; start() does the boot's loading
// (docs/architecture.md, "Wiring"): the engine is empty, nothing listens and readiness says
// `booting` until start() has put every live session in memory.
import t from 'tap'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import { loadConfig } from '../../gateway/config.js'
import { buildService } from '../../gateway/compose.js'
import { start } from '../../gateway/service.js'
import { createShutdownStack } from '../../gateway/shutdown.js'
import { testDatabase } from '../support/db.js'
import { createSession } from '../../sql/sessions.js'
import { addNumbers, addTenant, createArgs, party, phoneKey, proxy, record } from '../sql/fixtures.js'

t.test('buildService loads nothing; start() loads every live session, then listens', async t => {
  const db = await testDatabase(t)
  await addNumbers(db.pool)
  const tenant = await addTenant(db.pool)
  const rec = record(tenant, { proxy: proxy(1), agent: party(1), customer: party(2), at: Date.now() })
  t.equal(await createSession(db.pool, createArgs(tenant, rec)), 'ok')
  const dataDir = mkdtempSync(join(tmpdir(), 'maskline-build-'))
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }))
  const config = loadConfig({
    PORT: '0', HOST: '127.0.0.1', DATA_DIR: dataDir, LOG_LEVEL: 'silent', METRICS_PORT: 'off', PHONE_KEY: phoneKey.toString('base64'),
    JWT_SECRET: 'x'.repeat(64), CPAAS_PROVIDER: 'sandbox', CPAAS_SIGNATURE: 'none',
  })
  const shutdown = createShutdownStack()
  t.teardown(() => shutdown.run())
  const g = await buildService({ config, db, logDestination: new Writable({ write(_c, _e, cb) { cb() } }) }, shutdown)
  t.equal(g.engine.size(), 0, 'built: the engine holds no session')
  t.equal(g.engine.get(rec.id), undefined)
  t.equal(g.listener.port, null, 'built: nothing listens')
  t.equal(g.state.readiness, 'booting')

  const svc = await start(g, shutdown)
  t.equal(svc.engine.size(), 1, 'started: the live session is in memory')
  t.equal(svc.engine.get(rec.id)?.version, rec.version)
  t.equal(svc.boot.liveSessions, 1)
  t.equal(svc.readiness(), 'ready')
  const health = await fetch(`${svc.url}/v1/health`)
  t.equal(health.status, 200, 'and serves')
  await svc.close()
})
