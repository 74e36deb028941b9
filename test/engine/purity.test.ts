// style 1: the engine is pure. Fails the build if any engine file grows an import outside the
// allowlist or reads a clock, arms a timer or draws randomness.
import t from 'tap'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

const engineDir = fileURLToPath(new URL('../../engine/', import.meta.url))

const ALLOWED = [
  /^\.\/[a-z0-9-]+\.js$/, // siblings only: no ../, no directories
  /^libphonenumber-js\/(min|core|min\/metadata)$/,
]

const BANNED_CALLS: Array<[RegExp, string]> = [
  [/\bDate\.now\b/, 'Date.now'],
  [/\bnew\s+Date\b/, 'new Date'],
  [/\bsetTimeout\b/, 'setTimeout'],
  [/\bsetInterval\b/, 'setInterval'],
  [/\bsetImmediate\b/, 'setImmediate'],
  [/\bperformance\b/, 'performance'],
  [/\bprocess\s*\./, 'process'],
  [/\bMath\.random\b/, 'Math.random'],
  [/\brequire\s*\(/, 'require'],
  [/\benum\s+[A-Za-z_$]/, 'TS enum'],
  [/\bnamespace\s+[A-Za-z_$]/, 'TS namespace'],
]

/** Source without comments, so a comment may name what the code must not do. */
function stripComments(src: string): string {
  return src.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:'"`])\/\/.*$/gm, '$1')
}

function importsOf(src: string): string[] {
  const specs: string[] = []
  const patterns = [
    /\bimport\s+(?:type\s+)?[^'"`;]*?\bfrom\s*['"]([^'"]+)['"]/g,
    /\bexport\s+(?:type\s+)?[^'"`;]*?\bfrom\s*['"]([^'"]+)['"]/g,
    /\bimport\s*['"]([^'"]+)['"]/g,
    /\bimport\s*\(\s*['"`]([^'"`]+)['"`]\s*\)/g,
    /\bimport\s*\(\s*([^'"`\s)][^)]*)\)/g, // a computed dynamic import is itself a violation
  ]
  for (const re of patterns) for (const m of src.matchAll(re)) specs.push(m[1]!)
  return specs
}

function violations(src: string): string[] {
  const code = stripComments(src)
  const out: string[] = []
  for (const spec of importsOf(code)) {
    if (!ALLOWED.some(re => re.test(spec))) out.push(`imports ${spec}`)
  }
  for (const [re, name] of BANNED_CALLS) if (re.test(code)) out.push(`uses ${name}`)
  return out
}

t.test('the scanner catches what it is meant to catch', async t => {
  t.same(violations(`import { readFileSync } from 'node:fs'`), ['imports node:fs'])
  t.same(violations(`import type { Pool } from 'pg'`), ['imports pg'])
  t.same(violations(`export { x } from '../gateway/x.js'`), ['imports ../gateway/x.js'])
  t.same(violations(`import './side-effect.js'\nimport 'ioredis'`), ['imports ioredis'])
  t.same(violations(`const m = await import('node:crypto')`), ['imports node:crypto'])
  t.same(violations(`const m = await import(name)`), ['imports name'])
  t.same(violations(`const now = Date.now()`), ['uses Date.now'])
  t.same(violations(`const d = new Date(0)`), ['uses new Date'])
  t.same(violations(`setTimeout(f, 10)`), ['uses setTimeout'])
  t.same(violations(`const x = performance.now()`), ['uses performance'])
  t.same(violations(`enum Color { Red }`), ['uses TS enum'])
  t.same(violations(`// Date.now() is never called here\nimport { a } from './a.js'`), [])
  t.same(violations(`import m from 'libphonenumber-js/min/metadata'`), [])
  t.same(violations(`import { createNanoEvents } from 'nanoevents'`), ['imports nanoevents'])
})

t.test('every engine file is pure', async t => {
  const files = readdirSync(engineDir).filter(f => f.endsWith('.ts'))
  t.ok(files.length >= 10, 'engine files found')
  for (const f of files) {
    t.same(violations(readFileSync(join(engineDir, f), 'utf8')), [], `engine/${f}`)
  }
})

t.test('engine files are kebab-case and under 300 lines (style 2)', async t => {
  for (const f of readdirSync(engineDir)) {
    t.match(f, /^[a-z0-9]+(-[a-z0-9]+)*\.ts$/, `${f} is kebab-case .ts`)
    const lines = readFileSync(join(engineDir, f), 'utf8').split('\n').length
    t.ok(lines < 300, `engine/${f} has ${lines} lines`)
  }
})
