// One base for internal errors. Every error class of ours extends MasklineError (a
// `code` convention, the class name as `name`); none extends Error directly but the base itself.
// The HTTP problem catalog stays its own vocabulary (test/api/problems.test.ts).
import t from 'tap'
import { readdirSync, readFileSync, statSync } from 'node:fs'
import { join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { IndexConflictError, MasklineError, UnknownTenantError } from '../engine/errors.js'
import { ProviderError } from '../api/cpaas/provider.js'
import { BodyAborted, BodyTooLarge } from '../gateway/http/body.js'
import { ConfigError } from '../gateway/config.js'
import { ApiProblem } from '../api/route.js'
import { TokenError } from '../api/auth/tokens.js'
import { StoreError } from '../sql/errors.js'

const root = fileURLToPath(new URL('../', import.meta.url))

function* sources(dir: string): Generator<string> {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name)
    if (statSync(p).isDirectory()) yield* sources(p)
    else if (p.endsWith('.ts')) yield p
  }
}

t.test('no error class of ours extends Error but MasklineError', async t => {
  const direct: string[] = []
  for (const layer of ['engine', 'sql', 'api', 'gateway']) {
    for (const file of sources(join(root, layer))) {
      for (const m of readFileSync(file, 'utf8').matchAll(/class (\w+) extends (?:globalThis\.)?(?:Type)?Error\b/g)) {
        if (m[1] !== 'MasklineError') direct.push(`${relative(root, file)}: ${m[1]}`)
      }
    }
  }
  t.same(direct, [], 'extend MasklineError (engine/errors.ts) instead')
})

t.test('name is the class name, code follows the convention', async t => {
  const cases: Array<[MasklineError, string, RegExp]> = [
    [new UnknownTenantError('t1'), 'UnknownTenantError', /^ML_ERR_UNKNOWN_TENANT$/],
    [new IndexConflictError('s1', 'taken'), 'IndexConflictError', /^ML_ERR_INDEX_CONFLICT$/],
    [new BodyTooLarge(true), 'BodyTooLarge', /^ML_ERR_BODY_TOO_LARGE$/],
    [new BodyAborted(), 'BodyAborted', /^ML_ERR_BODY_ABORTED$/],
    [new ConfigError('PORT must be a port'), 'ConfigError', /^ML_ERR_CONFIG$/],
    [new ApiProblem('not-found'), 'ApiProblem', /^ML_ERR_PROBLEM$/],
    [new TokenError('expired'), 'TokenError', /^ML_ERR_TOKEN_EXPIRED$/],
    // Wrappers keep the foreign code callers act on.
    [new StoreError('conflict', '23505', 'sessions_pkey'), 'StoreError', /^23505$/],
    [new ProviderError('provider-timeout', { ambiguous: true, providerFault: true }), 'ProviderError', /^provider-timeout$/],
  ]
  for (const [err, name, code] of cases) {
    t.ok(err instanceof MasklineError && err instanceof Error, `${name} is a MasklineError`)
    t.equal(err.name, name)
    t.match(err.code, code, `${name}.code`)
    t.match(String(err.stack), new RegExp(`^${name}: `), `${name}'s stack starts with its name`)
  }
  t.equal(new ApiProblem('not-found').slug, 'not-found', 'ApiProblem still carries its catalog slug')
  t.equal(new StoreError('conflict', '23505').slug, 'conflict')
})
