// style 5: fixture corpora per request schema, run through the very validators the gateway
// compiles. test/fixtures/<schema>/good/*.json must pass, bad/*.json must fail (one failure per
// file, named after it).
import { readdirSync, readFileSync } from 'node:fs'
import t from 'tap'
import { compileRoute } from '../../gateway/http/compile.js'
import { toFieldIssues } from '../../gateway/http/validation-errors.js'
import { ownRoutes } from './harness.js'
import { sessionRoutes } from '../../api/routes/sessions.js'

const SCHEMAS: Record<string, string> = {
  'token-body': 'POST /v1/auth/token',
  'signup-body': 'POST /v1/auth/signup',
  'config-patch': 'PATCH /v1/config',
  'device-token-body': 'POST /v1/devices/token',
  'presence-body': 'POST /v1/devices/presence',
  'provision-body': 'POST /v1/numbers/provision',
  'session-create': 'POST /v1/sessions', // contract D10: stickyProxy, inactivityTimeoutMinutes, channels
  'session-patch': 'PATCH /v1/sessions/:id',
}

const routes = new Map(ownRoutes(sessionRoutes).map(r => [`${r.method} ${r.path}`, r]))
const dir = new URL('../fixtures/', import.meta.url)

for (const [name, key] of Object.entries(SCHEMAS)) {
  t.test(name, async t => {
    const validate = compileRoute(routes.get(key)!).validateBody!
    for (const kind of ['good', 'bad'] as const) {
      const files = readdirSync(new URL(`${name}/${kind}/`, dir)).filter(f => f.endsWith('.json'))
      t.ok(files.length > 0, `${kind} corpus present`)
      for (const f of files) {
        const body = JSON.parse(readFileSync(new URL(`${name}/${kind}/${f}`, dir), 'utf8'))
        const ok = validate(body) as boolean
        if (kind === 'good') t.ok(ok, `${f} passes`, { errors: toFieldIssues(validate.errors) })
        else t.equal(toFieldIssues(validate.errors).length, 1, `${f} fails once`, { errors: toFieldIssues(validate.errors) })
      }
    }
  })
}
