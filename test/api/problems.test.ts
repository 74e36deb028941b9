// Contract 7: the catalog in api/problems.ts matches the contract's table both ways (style 4).
import { readFileSync } from 'node:fs'
import t from 'tap'
import { REJECTIONS } from '../../engine/rejections.js'
import { problems, renderProblem, SPEC_SLUGS, isProblemSlug, type ProblemSlug } from '../../api/problems.js'
import { ApiProblem } from '../../api/route.js'

function specRows(text: string): Map<string, number> {
  const rows = new Map<string, number>()
  for (const line of text.split('\n')) {
    const m = /^\| ([a-z-]+) \| (\d{3})/.exec(line)
    if (m) rows.set(m[1]!, Number(m[2]))
  }
  return rows
}

const fixture = specRows(readFileSync(new URL('../fixtures/spec-7-errors.md', import.meta.url), 'utf8'))

t.test('every contract 7 row is in the catalog with its status', async t => {
  t.equal(fixture.size, 14)
  for (const [slug, status] of fixture) {
    t.ok(isProblemSlug(slug), `${slug} catalogued`)
    t.equal(problems[slug as ProblemSlug].status, status, `${slug} status`)
  }
})

t.test('every catalog slug is a contract 7 row, one of the HTTP-level extensions, or a pinned create\'s refusal', async t => {
  const extensions = ['method-not-allowed', 'payload-too-large', 'unsupported-media-type', 'unavailable']
  // Refusals of a pinned create (docs/dual-proxy.md): only the Twilio Proxy façade makes one, and
  // answers them as Twilio errors (80604 / 80605), so no native answer carries them.
  const pinned = ['proxy-in-use', 'proxy-unavailable']
  t.same(Object.keys(problems).filter(s => !fixture.has(s)).sort(), [...extensions, ...pinned].sort())
  t.same([...SPEC_SLUGS].sort(), [...fixture.keys()].sort())
  t.same(Object.fromEntries(extensions.map(s => [s, problems[s as ProblemSlug].status])), {
    'method-not-allowed': 405, 'payload-too-large': 413, 'unsupported-media-type': 415, unavailable: 503,
  })
})

// The contract's own table (docs/contract.md, section 7; its HTTP-level slugs are in D13), which
// the fixture keeps verbatim so a change to either shows here.
const contract = readFileSync(new URL('../../docs/contract.md', import.meta.url), 'utf8')
t.test('the fixture is the contract table', async t => {
  const section = contract.split('## 7. Errors')[1]!.split('## 8.')[0]!
  t.same(specRows(section), fixture)
  t.same(Object.fromEntries(specRows(contract.split('## D13.')[1]!)), {
    'method-not-allowed': 405, 'payload-too-large': 413, 'unsupported-media-type': 415, unavailable: 503,
  })
})

t.test('every engine rejection has a catalog entry', async t => {
  for (const r of REJECTIONS) t.ok(isProblemSlug(r), r)
})

t.test('a problem renders as contract 7 says', async t => {
  const doc = renderProblem('https://api.example', 'invalid-target', 'Target equals the agent number', [{ field: 'customerPhone', issue: 'same_as_agent' }])
  t.match(doc.instance, /^urn:maskline:err:[0-9a-f-]{36}$/)
  t.same(doc, {
    type: 'https://api.example/errors/invalid-target',
    title: problems['invalid-target'].title,
    status: 422,
    detail: 'Target equals the agent number',
    instance: doc.instance,
    errors: [{ field: 'customerPhone', issue: 'same_as_agent' }],
  })
  const bare = renderProblem('https://api.example', 'not-found')
  t.equal(bare.detail, problems['not-found'].title, 'detail defaults to the title')
  t.notOk('errors' in bare, 'no empty errors array')
})

t.test('ApiProblem carries slug, status and extras', async t => {
  const p = new ApiProblem('rate-limit', 'slow down', { headers: { 'retry-after': '3' } })
  t.equal(p.status, 429)
  t.equal(p.slug, 'rate-limit')
  t.same(p.headers, { 'retry-after': '3' })
  // @ts-expect-error a slug outside the catalog does not compile
  t.throws(() => new ApiProblem('no-such-slug'))
})
