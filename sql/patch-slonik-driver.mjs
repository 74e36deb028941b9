// postinstall: fixes a connection leak in @slonik/driver 47.3.2 (createDriverFactory internalDestroy).
// When Postgres dies mid-query, `Promise.race([delay, activeQueryPromise])` rejects with the
// query's error, so the connection never emits 'destroy', stays PENDING_DESTROY and keeps its
// pool slot forever: after as many crashes as the pool has connections, every query waits
// forever (found by test/durability/pg-restart.test.ts). The fix waits for the query to settle
// either way. Idempotent; a no-op once upstream changes the line.
import { readFileSync, writeFileSync, existsSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'

const require = createRequire(import.meta.url)
let file
try {
  file = join(dirname(require.resolve('@slonik/driver/package.json', { paths: [join(dirname(new URL(import.meta.url).pathname), '..', 'node_modules', 'slonik')] })), 'dist', 'factories', 'createDriverFactory.js')
} catch {
  file = join(dirname(new URL(import.meta.url).pathname), '..', 'node_modules', '@slonik', 'driver', 'dist', 'factories', 'createDriverFactory.js')
}
if (!existsSync(file)) process.exit(0)
const src = readFileSync(file, 'utf8')
const broken = /(\(0, promises_1\.setTimeout\)\(driverConfiguration\.gracefulTerminationTimeout\),\s*)activeQueryPromise,/
if (broken.test(src)) {
  writeFileSync(file, src.replace(broken, '$1activeQueryPromise.catch(() => { }),'))
  console.log('maskline: patched @slonik/driver connection leak on destroy')
}
