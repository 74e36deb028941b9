// scripts/cite-docs.mjs: the rewrite of the code's citations into citations of docs/contract.md
// and docs/style.md, on the variants the tree holds, and the check that every citation names a
// section those documents define (the promise that makes the rewrite mechanical).
import t from 'tap'
import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'

const SCRIPT = fileURLToPath(new URL('../../scripts/cite-docs.mjs', import.meta.url))
const REPO = fileURLToPath(new URL('../../', import.meta.url))

function rewrite(text: string): string {
  const r = spawnSync(process.execPath, [SCRIPT, '--stdin'], { input: text, encoding: 'utf8' })
  if (r.status !== 0) throw new Error(`cite-docs --stdin exited ${r.status}: ${r.stderr}`)
  return r.stdout
}

t.test('each variant of the old citations becomes its contract or style section', async t => {
  const cases: Array<[string, string]> = [
    ['// Cooldown (spec 3.1): a party', '// Cooldown (contract 3.1): a party'],
    ['// Spec 4.1: token exchange', '// Contract 4.1: token exchange'],
    ['(spec 4.1, 5; DECISIONS 3)', '(contract 4.1, 5; contract D3)'],
    ['spec 2.5-2.7, 4.6, 8.5', 'contract 2.5-2.7, 4.6, 8.5'],
    ['Spec 5.2/5.3 keep', 'Contract 5.2/5.3 keep'],
    ['Spec 4.1 and 5', 'Contract 4.1 and 5'],
    ['the rows of spec section 7', 'the rows of contract section 7'],
    ['(spec 7)', '(contract 7)'],
    ['(spec 8.2, 429)', '(contract 8.2, 429)'],
    ['DECISIONS 4-5', 'contract D4-D5'],
    ['DECISIONS 2/3', 'contract D2/D3'],
    ['DECISIONS 2, 4', 'contract D2, D4'],
    ['DECISIONS §2', 'contract D2'],
    ['(DECISIONS 5: 2 s)', '(contract D5: 2 s)'],
    ['(DECISIONS 1 RETENTION_DAYS)', '(contract D1 RETENTION_DAYS)'],
    ["'DECISIONS 6: 0 s, 5 s, 5 min'", "'contract D6: 0 s, 5 s, 5 min'"],
    ['(STYLE 1, 3)', '(style 1, 3)'],
    ['STYLE §2', 'style 2'],
    ['(STYLE 10)', '(style 10)'],
  ]
  const out = rewrite(cases.map(c => c[0]).join('\n')).split('\n')
  cases.forEach(([from, to], i) => t.equal(out[i], to, from))
})

t.test('what is not a citation stays as it is', async t => {
  const text = [
    'for (const spec of importsOf(file))',
    'test/fixtures/spec-7-errors.md',
    '`whsec_` + base64 of 32 random bytes (the spec allows 24 to 64)',
    'an OpenAPI 3.1 document',
    'DECISIONS.md',
  ].join('\n')
  t.equal(rewrite(text), text)
})

t.test('every citation in the tree names a section of docs/contract.md or docs/style.md', async t => {
  const r = spawnSync(process.execPath, [SCRIPT], { cwd: REPO, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 })
  const dangling = r.stdout.split(/^\d+ citations point at no section.*$/m)[1]?.split('\n\n')[0] ?? r.stdout.slice(-2_000)
  t.match(r.stdout, /^0 citations point at no section of docs\/contract\.md or docs\/style\.md$/m, `dangling citations:${dangling}`)
})
