// Issue 14: the layering, enforced. Fails when a source file imports against the allowed graph:
//
//   engine            imports nothing of ours outside engine/ (test/engine/purity.test.ts adds:
//                     no clock, timer, randomness, network, nor any package outside its allowlist)
//   api/vocabulary    the shared vocabulary (ids, the event envelope type and builder): a leaf that
//                     every layer may import; it imports nothing of ours but engine/ and itself
//   sql               the Postgres store: engine/, api/vocabulary/ and sql/ only — never the rest of
//                     api/ nor gateway/
//   api               handlers, schemas, auth, webhook URL checks and signing (api/webhooks/, which
//                     the gateway's dispatcher also uses): engine/, sql/ and api/ — never gateway/
//   gateway           the edge and composition root (uWS, Redis bus, Telnyx client, dispatcher,
//                     main): may import every layer above; nothing imports it
//   console           the operator console's browser sources (issue 15): its own files and npm
//                     packages only; it reaches the service over HTTP, never by import, and the
//                     gateway serves its built files without importing them; it may import the
//                     client SDK (sdk/src), through which it calls the service
//   sdk               the client SDK (@maskline/sdk, its own package): its own files and npm
//                     packages only, never the server's code
//
// So dependencies point one way, toward the pure engine: adapters at the edge depend on it, never
// the reverse. No production file imports test/ or bench/; test/ and bench/ may import anything.
import t from 'tap'
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { join, relative, resolve, dirname, sep } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('../', import.meta.url))

type Layer = 'engine' | 'vocabulary' | 'sql' | 'api' | 'gateway' | 'console' | 'sdk' | 'test' | 'bench'

const ALLOWED: Record<'engine' | 'vocabulary' | 'sql' | 'api' | 'gateway' | 'console' | 'sdk', readonly Layer[]> = {
  engine: ['engine'],
  vocabulary: ['vocabulary', 'engine'],
  sql: ['sql', 'vocabulary', 'engine'],
  api: ['api', 'vocabulary', 'sql', 'engine'],
  gateway: ['gateway', 'api', 'vocabulary', 'sql', 'engine'],
  console: ['console', 'sdk'],
  sdk: ['sdk'],
}

/** The layer of a repository-relative path (posix separators), or undefined outside the source tree. */
function layerOf(path: string): Layer | undefined {
  const [top, second] = path.split('/')
  if (top === 'api' && second === 'vocabulary') return 'vocabulary'
  if (top === 'engine' || top === 'sql' || top === 'api' || top === 'gateway' || top === 'console' || top === 'sdk' || top === 'test' || top === 'bench') return top
  return undefined
}

/** Source without comments, so a comment may name what the code must not import. */
function stripComments(src: string): string {
  return src.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:'"`])\/\/.*$/gm, '$1')
}

function importsOf(src: string): Array<{ spec: string; computed: boolean }> {
  const specs: Array<{ spec: string; computed: boolean }> = []
  const patterns = [
    /\bimport\s+(?:type\s+)?[^'"`;]*?\bfrom\s*['"]([^'"]+)['"]/g,
    /\bexport\s+(?:type\s+)?[^'"`;]*?\bfrom\s*['"]([^'"]+)['"]/g,
    /\bimport\s*['"]([^'"]+)['"]/g,
    /\bimport\s*\(\s*['"`]([^'"`]+)['"`]\s*\)/g,
  ]
  for (const re of patterns) for (const m of src.matchAll(re)) specs.push({ spec: m[1]!, computed: false })
  // a computed dynamic import: its target cannot be checked, so it is itself a violation
  for (const m of src.matchAll(/\bimport\s*\(\s*([^'"`\s)][^)]*)\)/g)) specs.push({ spec: m[1]!, computed: true })
  return specs
}

/** What `file` (repository-relative, posix) imports against the layering. */
function violations(file: string, src: string): string[] {
  const from = layerOf(file)
  if (from === undefined || from === 'test' || from === 'bench') return []
  const out: string[] = []
  for (const { spec, computed } of importsOf(stripComments(src))) {
    if (computed) { out.push(`imports ${spec} (computed)`); continue }
    if (!spec.startsWith('.')) continue // a package or a node: builtin
    const target = relative(root, resolve(root, dirname(file), spec)).split(sep).join('/')
    const to = target.startsWith('..') ? undefined : layerOf(target)
    if (to === undefined || !ALLOWED[from].includes(to)) out.push(`${from} imports ${to ?? 'outside the source tree'}: ${spec}`)
  }
  return out
}

function sources(dir: string): string[] {
  const out: string[] = []
  for (const name of readdirSync(join(root, dir))) {
    const path = `${dir}/${name}`
    if (statSync(join(root, path)).isDirectory()) {
      if (name !== 'node_modules' && name !== 'migrations') out.push(...sources(path))
    } else if (/\.(ts|mts|mjs|js)$/.test(name) && !name.endsWith('.d.ts')) out.push(path)
  }
  return out
}

t.test('the scanner catches what it is meant to catch', async t => {
  t.same(violations('sql/x.ts', `import { f } from '../api/route.js'`), ['sql imports api: ../api/route.js'])
  t.same(violations('sql/x.ts', `import type { EventEnvelope } from '../api/vocabulary/event-envelope.js'`), [])
  t.same(violations('sql/x.ts', `export { a as b } from '../api/auth/credentials.js'`), ['sql imports api: ../api/auth/credentials.js'])
  t.same(violations('sql/x.ts', `import { S } from '../gateway/service.js'`), ['sql imports gateway: ../gateway/service.js'])
  t.same(violations('api/routes/w.ts', `import { sign } from '../../gateway/webhooks/signing.js'`), ['api imports gateway: ../../gateway/webhooks/signing.js'])
  t.same(violations('api/routes/w.ts', `import { sign } from '../webhooks/signing.js'\nimport { q } from '../../sql/webhooks.js'`), [])
  t.same(violations('api/vocabulary/x.ts', `import { ApiProblem } from '../route.js'`), ['vocabulary imports api: ../route.js'])
  t.same(violations('api/vocabulary/x.ts', `import { q } from '../../sql/db.js'`), ['vocabulary imports sql: ../../sql/db.js'])
  t.same(violations('api/vocabulary/x.ts', `import type { TenantId } from '../../engine/types.js'\nimport { uuidv7 } from './ids.js'`), [])
  t.same(violations('engine/x.ts', `import type { EventEnvelope } from '../api/vocabulary/event-envelope.js'`), ['engine imports vocabulary: ../api/vocabulary/event-envelope.js'])
  t.same(violations('engine/x.ts', `import { q } from '../sql/db.js'`), ['engine imports sql: ../sql/db.js'])
  t.same(violations('gateway/x.ts', `import { h } from '../test/support/service.js'`), ['gateway imports test: ../test/support/service.js'])
  t.same(violations('api/x.ts', `import '../bench/lib/population.js'`), ['api imports bench: ../bench/lib/population.js'])
  t.same(violations('sql/x.ts', `const m = await import('../api/log.js')`), ['sql imports api: ../api/log.js'])
  t.same(violations('sql/x.ts', `import { x } from '../../elsewhere/x.js'`), ['sql imports outside the source tree: ../../elsewhere/x.js'])
  t.same(violations('sql/x.ts', `const m = await import(name)`), ['imports name (computed)'])
  t.same(violations('gateway/x.ts', `import { a } from '../api/route.js'\nimport { b } from '../sql/db.js'\nimport { c } from '../engine/index.js'`), [])
  t.same(violations('sql/x.ts', `// once imported '../api/route.js'\nimport pg from 'pg'\nconst m = await import('@electric-sql/pglite')`), [])
  t.same(violations('test/x.ts', `import { S } from '../gateway/service.js'`), [], 'tests may import anything')
  t.same(violations('console/src/x.ts', `import type { SessionView } from '../../api/schemas/session.js'`), ['console imports api: ../../api/schemas/session.js'])
  t.same(violations('console/src/x.ts', `import { html } from 'htm/preact'\nimport { get } from './api.js'`), [])
  t.same(violations('gateway/x.ts', `import { App } from '../console/src/main.js'`), ['gateway imports console: ../console/src/main.js'])
  t.same(violations('console/src/x.ts', `import { Maskline } from '../../sdk/src/client.js'`), [])
  t.same(violations('sdk/src/x.ts', `import type { SessionView } from '../../api/schemas/session.js'`), ['sdk imports api: ../../api/schemas/session.js'])
})

t.test('every source file imports along the layering', async t => {
  const files = ['engine', 'sql', 'api', 'gateway', 'console/src', 'sdk/src'].flatMap(sources)
  t.ok(files.length >= 100, `${files.length} source files found`)
  t.ok(files.some(f => f.startsWith('api/vocabulary/')), 'the vocabulary found')
  t.ok(files.some(f => f.startsWith('console/src/')), 'the console found')
  for (const f of files) {
    const found = violations(f, readFileSync(join(root, f), 'utf8'))
    if (found.length > 0) t.same(found, [], f)
  }
  t.pass('all files scanned')
})
