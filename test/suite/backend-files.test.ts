// The suite runs a test file on the embedded backend too only when it depends on the backend
// (test/backend-files.mjs): a file that reaches a database or bus helper through any chain of
// imports in test/ must never be left out of the embedded run.
import t, { type Test } from 'tap'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'

import { backendBound, testFiles } from '../backend-files.mjs'

function tree(t: Test, files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'maskline-backend-files-'))
  t.teardown(() => rmSync(root, { recursive: true, force: true }))
  for (const [p, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, p)), { recursive: true })
    writeFileSync(join(root, p), text)
  }
  return root
}

t.test('a file is backend-bound through any chain of imports in test/', async t => {
  const root = tree(t, {
    'test/support/db.ts': "export const url = process.env.TEST_DATABASE_URL\n",
    'test/support/wrap.ts': "import { url } from './db.js'\nexport { url }\n",
    'test/api/direct.test.ts': "import { url } from '../support/db.js'\n",
    'test/api/chained.test.ts': "import { url } from '../support/wrap.js'\n",
    'test/api/dynamic.test.ts': "const m = await import('../support/wrap.js')\n",
    'test/api/env.test.ts': "const b = process.env.MASKLINE_TEST_BACKEND\n",
    'test/engine/pure.test.ts': "import { x } from '../../engine/x.js'\nimport t from 'tap'\n",
    'engine/x.ts': "export const x = process.env.TEST_DATABASE_URL\n", // outside test/: not followed
    'test/cycle/a.test.ts': "import './b.js'\n",
    'test/cycle/b.ts': "import './a.test.js'\n",
  })
  const bound = backendBound(root)
  t.same(testFiles(['test'], root).filter(bound),
    ['test/api/chained.test.ts', 'test/api/direct.test.ts', 'test/api/dynamic.test.ts', 'test/api/env.test.ts'])
  t.same(testFiles(['test/engine', 'test/cycle/a.test.ts'], root).filter(f => !bound(f)), ['test/cycle/a.test.ts', 'test/engine/pure.test.ts'])
})

t.test('in this repository: service tests run on both backends, the engine\'s once', async t => {
  const bound = backendBound()
  t.ok(bound('test/api/sessions-lifecycle.test.ts'))
  t.ok(bound('test/durability/crash.test.ts'))
  t.notOk(bound('test/engine/region.test.ts'))
  t.notOk(bound('test/cpaas/texml-escaping.test.ts'))
})
