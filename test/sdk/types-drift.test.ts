// The SDK's request and answer types are generated from the service's OpenAPI document
// (sdk/scripts/generate-types.mjs). Regenerated here from a live service's GET /v1/openapi.json:
// a schema changed in api/ without regenerating sdk/src/openapi.ts fails this test.
import t from 'tap'
import { readFileSync } from 'node:fs'
import { startTestService } from '../support/service.js'
import { TYPES_FILE, typesSource } from '../../sdk/scripts/generate-types.mjs'

t.test('sdk/src/openapi.ts is what the live service\'s OpenAPI document generates', async t => {
  const api = await startTestService(t)
  const res = await api.req('GET', '/v1/openapi.json')
  t.equal(res.status, 200)
  const want = await typesSource(res.body)
  const have = readFileSync(TYPES_FILE, 'utf8')
  if (have !== want) {
    const a = have.split('\n'), b = want.split('\n')
    const at = a.findIndex((line, i) => line !== b[i])
    t.fail(`sdk/src/openapi.ts differs from the service's document from line ${at + 1} (committed: ${JSON.stringify(a[at])}, generated: ${JSON.stringify(b[at])}); ` +
      'regenerate it: npm start, then node sdk/scripts/generate-types.mjs http://localhost:8080/v1/openapi.json')
  } else t.pass('no drift')
})
