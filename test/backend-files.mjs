// Which test files depend on the backend. The suite runs twice, once on real Postgres + Redis and
// once on the embedded default (PGlite, in-process bus); a file that touches neither database nor
// bus (the engine, TeXML rendering, signatures, parsers…) would only run the same code twice. A
// file is backend-bound when it, or any file of test/ it imports (transitively), reads one of the
// variables test/run.mjs sets per backend: every helper that opens a database, starts a service
// or a bus reads them (test/support/db.ts, service.ts, child-service.ts, …).
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'

const BACKEND_ENV = /\b(?:TEST_DATABASE_URL|TEST_REDIS_URL|MASKLINE_TEST_BACKEND)\b/
const IMPORT = /(?:\bfrom|\bimport)\s*\(?\s*['"](\.{1,2}\/[^'"]+)['"]/g

function walk(dir) {
  return readdirSync(dir).flatMap(n => {
    const p = join(dir, n)
    return statSync(p).isDirectory() ? walk(p) : [p]
  })
}

/** A relative import as the file it names (NodeNext's `./x.js` is `./x.ts` in the sources). */
function importedFile(from, spec) {
  const p = resolve(dirname(from), spec)
  for (const c of [p, p.replace(/\.js$/, '.ts'), p.replace(/\.js$/, '.mjs'), `${p}.ts`]) if (existsSync(c) && statSync(c).isFile()) return c
  return null
}

export function backendBound(root = process.cwd()) {
  const testDir = join(root, 'test')
  const memo = new Map()
  const bound = (file, path = new Set()) => {
    if (memo.has(file)) return memo.get(file)
    if (path.has(file)) return false // a cycle: decided by the files around it
    path.add(file)
    const src = readFileSync(file, 'utf8')
    let b = BACKEND_ENV.test(src)
    for (const m of src.matchAll(IMPORT)) {
      if (b) break
      const dep = importedFile(file, m[1])
      if (dep && !relative(testDir, dep).startsWith('..')) b = bound(dep, path)
    }
    path.delete(file)
    memo.set(file, b)
    return b
  }
  return file => bound(resolve(root, file))
}

/** The `.test.ts` files under `paths` (files or folders, relative to `root`). */
export function testFiles(paths, root = process.cwd()) {
  return paths.flatMap(p => {
    const abs = resolve(root, p)
    return statSync(abs).isDirectory() ? walk(abs).filter(f => f.endsWith('.test.ts')).map(f => relative(root, f)) : [p]
  }).sort()
}
