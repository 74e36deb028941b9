// engine/recent.ts Recent: the bounded memory of provider ids that makes replayed callbacks
// change nothing twice (api/cpaas/callbacks/context.ts, sql/record-writer.ts). It must keep at least the
// newest half of its bound and forget the oldest.
import t from 'tap'
import { Recent } from '../../engine/recent.js'

t.test('keeps the newest 50,000 keys, forgets old ones, and a later set wins', async t => {
  const r = new Recent<number>(100_000)
  const total = 250_000
  for (let i = 0; i < total; i++) r.set(`CA${i}`, i)
  let kept = 0
  for (let i = total - 50_000; i < total; i++) if (r.get(`CA${i}`) === i) kept++
  t.equal(kept, 50_000, 'every one of the newest 50,000 is remembered')
  t.equal(r.get('CA0'), undefined, 'the oldest are forgotten (bounded memory)')
  t.equal(r.get(`CA${total - 100_001}`), undefined, 'nothing older than two generations')
  r.set(`CA${total - 1}`, -1)
  t.equal(r.get(`CA${total - 1}`), -1)
})

t.test('a count bound alone: filled far past it, it holds no more than max', async t => {
  const r = new Recent<true>(1_000)
  for (let i = 0; i < 50_000; i++) {
    r.set(`k${i}`, true)
    if (r.size > 1_000) t.fail(`held ${r.size} keys after ${i + 1} sets`)
  }
  t.ok(r.size <= 1_000 && r.size >= 500, `holds ${r.size}`)
})

t.test('with maxAgeMs: under steady traffic it holds about rate × maxAgeMs, each key between maxAgeMs / 2 and maxAgeMs (fake clock)', async t => {
  let now = 0
  const r = new Recent<number>(1_000_000, { maxAgeMs: 60_000, now: () => now })
  // 100 keys a second for 10 minutes: 60,000 keys, ten times what a minute holds.
  let most = 0
  for (let i = 0; i < 60_000; i++) {
    now = i * 10
    r.set(`CA${i}`, i)
    most = Math.max(most, r.size)
  }
  t.ok(most <= 6_000, `never more than a minute of keys (at most ${most})`)
  t.ok(r.size >= 3_000, `at least half a minute of keys (${r.size})`)
  t.equal(r.get('CA59999'), 59_999, 'the newest is there')
  t.equal(r.get(`CA${60_000 - 3_000}`), 60_000 - 3_000, 'one set 30 s ago is there')
  t.equal(r.get(`CA${60_000 - 6_001}`), undefined, 'one set more than 60 s ago is gone')
})

t.test('with maxAgeMs: after a pause longer than maxAgeMs nothing old answers, and the count bound still holds', async t => {
  let now = 0
  const r = new Recent<true>(100, { maxAgeMs: 1_000, now: () => now })
  for (let i = 0; i < 1_000; i++) r.set(`a${i}`, true)
  t.ok(r.size <= 100, `the count bound first (${r.size})`)
  t.ok(r.get('a999'))
  now = 1_000
  t.equal(r.get('a999'), undefined, 'older than maxAgeMs: forgotten on the next look')
  t.equal(r.size, 0)
})
