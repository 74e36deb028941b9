// The SDK package as a tenant installs it: its sources type-check and build with tsc (ESM and
// .d.ts; browser and Node libs, no Node types), `npm pack` of it holds only the build, the README
// and package.json, and the build loads in Node without the server's code.
import t from 'tap'
import { execFileSync } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('../..', import.meta.url))
const sdk = join(root, 'sdk')
const tsc = join(root, 'node_modules/typescript/bin/tsc')

t.test('tsc -p sdk type-checks and builds the package', async t => {
  // Under node_modules, so the build's one dependency (standardwebhooks) resolves as installed.
  mkdirSync(join(root, 'node_modules/.cache'), { recursive: true })
  const out = mkdtempSync(join(root, 'node_modules/.cache/maskline-sdk-build-'))
  t.teardown(() => rmSync(out, { recursive: true, force: true }))
  execFileSync(process.execPath, [tsc, '-p', sdk, '--outDir', out], { stdio: 'pipe' })
  const files = readdirSync(out)
  for (const f of ['index.js', 'index.d.ts', 'client.js', 'stream.js', 'openapi.d.ts']) t.ok(files.includes(f), `built ${f}`)
  const mod = await import(join(out, 'index.js')) as typeof import('../../sdk/src/index.js')
  t.type(mod.Maskline, 'function', 'the build loads and exports Maskline')
  t.type(mod.verifyWebhook, 'function')
  t.notOk(files.some(f => f.endsWith('.ts') && !f.endsWith('.d.ts')), 'no sources in the build')
})

t.test('npm pack: only the build, README.md and package.json', async t => {
  execFileSync(process.execPath, [tsc, '-p', sdk], { stdio: 'pipe' })
  const packed = JSON.parse(execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: sdk, encoding: 'utf8' })) as Array<{ name: string; files: Array<{ path: string }> }>
  t.equal(packed[0]!.name, '@maskline/sdk')
  const paths = packed[0]!.files.map(f => f.path).sort()
  t.same(paths.filter(p => !/^dist\/[a-z-]+\.(js|d\.ts)$/.test(p) && p !== 'README.md' && p !== 'package.json'), [], 'nothing else')
  for (const p of ['README.md', 'package.json', 'dist/index.js', 'dist/index.d.ts']) t.ok(paths.includes(p), p)
})
