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
