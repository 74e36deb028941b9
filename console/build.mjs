// Builds the operator console (README.md, Operator console) into console/dist, which is committed so `npm start`
// serves it without a build step: `npm run build:console`. With --check it builds in memory and
// exits 1 when console/dist differs from what the sources give (test/console/build.test.ts), so
// the committed files never drift from console/src. Asset names carry a content hash (the
// service caches them for a year); index.html names them.
import { build } from 'esbuild'
import { Buffer } from 'node:buffer'
import { createHash } from 'node:crypto'
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { basename, dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = dirname(fileURLToPath(import.meta.url))
const out = join(root, 'dist')
const check = process.argv.includes('--check')

const result = await build({
  entryPoints: [join(root, 'src/main.ts')],
  bundle: true,
  minify: true,
  format: 'esm',
  target: ['es2022', 'chrome110', 'firefox110', 'safari16'],
  outdir: out,
  entryNames: 'app',
  write: false,
  legalComments: 'eof',
  charset: 'utf8',
  logLevel: 'warning',
  absWorkingDir: root,
})

const digest = m => createHash('sha256').update(m).digest('hex').slice(0, 12)
/**
 * name → bytes of what console/dist must hold. The hash in a name is of the file's own bytes
 * (esbuild's [hash] also covers the input paths, which differ between checkouts).
 */
const files = new Map()
for (const f of result.outputFiles) {
  const bytes = Buffer.from(f.contents)
  files.set(basename(f.path).replace(/^app\./, `app-${digest(bytes)}.`), bytes)
}
const js = [...files.keys()].find(n => n.endsWith('.js'))
const css = [...files.keys()].find(n => n.endsWith('.css'))
if (!js || !css) throw new Error('console build: expected one .js and one .css output')
const index = readFileSync(join(root, 'src/index.html'), 'utf8').replace('{{js}}', `/console/${js}`).replace('{{css}}', `/console/${css}`)
files.set('index.html', Buffer.from(index))

if (check) {
  let present = []
  try { present = readdirSync(out) } catch { /* no dist */ }
  const problems = []
  for (const [name, bytes] of files) {
    let have = null
    try { have = readFileSync(join(out, name)) } catch { /* missing */ }
    if (!have) problems.push(`missing ${name}`)
    else if (!have.equals(bytes)) problems.push(`${name} differs (${digest(have)} committed, ${digest(bytes)} built)`)
  }
  for (const name of present) if (!files.has(name)) problems.push(`stale ${name}`)
  if (problems.length) {
    console.error(`console/dist is not what console/src builds to: ${problems.join('; ')}. Run npm run build:console and commit console/dist.`)
    process.exit(1)
  }
  console.log(`console/dist matches console/src (${files.size} files)`)
} else {
  rmSync(out, { recursive: true, force: true })
  mkdirSync(out, { recursive: true })
  for (const [name, bytes] of files) writeFileSync(join(out, name), bytes)
  console.log(`console/dist: ${[...files].map(([n, b]) => `${n} ${b.length} B`).join(', ')}`)
}
