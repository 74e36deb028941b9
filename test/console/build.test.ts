// README.md, Operator console: console/dist is committed (npm start serves it without a build step), so it must be
// exactly what console/src builds to: this rebuilds in memory and compares bytes, and type-checks
// the console's sources (the root tsconfig leaves them out: they are browser code).
import t from 'tap'
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { fileURLToPath } from 'node:url'

const run = promisify(execFile)
const root = fileURLToPath(new URL('../../', import.meta.url))

t.test('rebuilding console/src gives the committed console/dist, byte for byte', async t => {
  const r = await run(process.execPath, ['console/build.mjs', '--check'], { cwd: root }).catch((e: { stdout: string; stderr: string }) => e)
  t.equal(r.stderr.trim(), '', 'no difference reported')
  t.match(r.stdout, /console\/dist matches console\/src/)
})

t.test('the console sources type-check (console/tsconfig.json: DOM, strict)', async t => {
  const r = await run(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'console/tsconfig.json'], { cwd: root })
    .then(() => ({ stdout: '' }), (e: { stdout: string }) => e)
  t.equal(r.stdout.trim(), '', 'tsc reports nothing')
})
