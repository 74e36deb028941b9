// The layering, enforced: a plain order, lowest first. A source file imports its own layer and the
// layers below it, never one above (test/engine/purity.test.ts adds for the engine: no clock,
// timer, randomness, network, nor any package outside its allowlist):
//
//   engine           the pure routing engine
//   sql/vocabulary   the shared vocabulary (ids, ISO time, MACs, the event envelope type and
//                    builder): what the store writes and every layer above reads
//   sql              the Postgres store
//   api              the application: use cases (api/app), HTTP routes, schemas, auth, the provider
//                    concern (api/cpaas: callback handlers, dialects, clients, SMS compliance),
//                    webhook URL checks and signing
//   gateway          the process edge and composition root (uWS, Redis bus, stream, webhook
//                    dispatcher, config, main): nothing imports it
//   console          the operator console's browser sources: its own files, npm packages and the
//                    client SDK (sdk/src), through which it calls the service over HTTP; the
//                    gateway serves its built files without importing them
//   sdk              the client SDK (@maskline/sdk, its own package): its own files and npm
//                    packages only, never the server's code
//
// So dependencies point one way, toward the pure engine: adapters at the edge depend on it, never
// the reverse. No production file imports test/ or bench/; test/ and bench/ may import anything.
import t from 'tap'
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { join, relative, resolve, dirname, sep } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('../', import.meta.url))

/** The service's layers, lowest first: each may import itself and what precedes it. */
const ORDER = ['engine', 'sql/vocabulary', 'sql', 'api', 'gateway'] as const
/** Folders outside the order: the console imports itself and the SDK, the SDK only itself; test/ and bench/ anything. */
const APART = ['console', 'sdk', 'test', 'bench'] as const
type Layer = typeof ORDER[number] | typeof APART[number]

function allowed(from: Layer, to: Layer): boolean {
  if (from === 'console') return to === 'console' || to === 'sdk'
  if (from === 'sdk') return to === 'sdk'
  const rank = (l: Layer) => (ORDER as readonly Layer[]).indexOf(l)
  return rank(from) >= 0 && rank(to) >= 0 && rank(to) <= rank(from)
}

/** The layer of a repository-relative path (posix separators): its longest folder prefix in the order. */
function layerOf(path: string): Layer | undefined {
  return [...ORDER, ...APART].filter(l => path.startsWith(`${l}/`)).sort((a, b) => b.length - a.length)[0]
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
    if (to === undefined || !allowed(from, to)) out.push(`${from} imports ${to ?? 'outside the source tree'}: ${spec}`)
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
  t.same(violations('sql/x.ts', `import type { EventEnvelope } from './vocabulary/event-envelope.js'`), [])
  t.same(violations('sql/x.ts', `import type { EventEnvelope } from '../api/vocabulary/event-envelope.js'`), ['sql imports api: ../api/vocabulary/event-envelope.js'])
  t.same(violations('sql/x.ts', `export { a as b } from '../api/auth/credentials.js'`), ['sql imports api: ../api/auth/credentials.js'])
  t.same(violations('sql/x.ts', `import { S } from '../gateway/service.js'`), ['sql imports gateway: ../gateway/service.js'])
  t.same(violations('api/routes/w.ts', `import { sign } from '../../gateway/webhooks/signing.js'`), ['api imports gateway: ../../gateway/webhooks/signing.js'])
  t.same(violations('api/routes/w.ts', `import { sign } from '../webhooks/signing.js'\nimport { q } from '../../sql/webhooks.js'`), [])
  t.same(violations('sql/vocabulary/x.ts', `import { ApiProblem } from '../../api/route.js'`), ['sql/vocabulary imports api: ../../api/route.js'])
  t.same(violations('sql/vocabulary/x.ts', `import { q } from '../db.js'`), ['sql/vocabulary imports sql: ../db.js'])
  t.same(violations('sql/vocabulary/x.ts', `import type { TenantId } from '../../engine/types.js'\nimport { uuidv7 } from './ids.js'`), [])
  t.same(violations('engine/x.ts', `import type { EventEnvelope } from '../sql/vocabulary/event-envelope.js'`), ['engine imports sql/vocabulary: ../sql/vocabulary/event-envelope.js'])
  t.same(violations('api/cpaas/callbacks/x.ts', `import { bus } from '../../../gateway/bus.js'`), ['api imports gateway: ../../../gateway/bus.js'])
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
  t.ok(files.some(f => f.startsWith('sql/vocabulary/')), 'the vocabulary found')
  t.ok(files.some(f => f.startsWith('console/src/')), 'the console found')
  for (const f of files) {
    const found = violations(f, readFileSync(join(root, f), 'utf8'))
    if (found.length > 0) t.same(found, [], f)
  }
  t.pass('all files scanned')
})
