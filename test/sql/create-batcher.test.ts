// sql/create-batcher.ts without a database: who goes alone, who goes together, and that a batch
// that writes nothing leaves every create its own answer.
import t from 'tap'
import { CreateBatcher } from '../../sql/create-batcher.js'

interface Call { kind: 'one' | 'many'; items: number[]; release: (v: unknown) => void; fail: (err: unknown) => void }

/** A runner whose calls stay pending until the test settles them. */
function runner() {
  const calls: Call[] = []
  const pending = (kind: Call['kind'], items: number[]) => new Promise<unknown>((release, fail) => calls.push({ kind, items, release, fail }))
  return {
    calls,
    batcher: (slots: number, maxBatch: number) => new CreateBatcher<number, string>({
      one: n => pending('one', [n]) as Promise<string>,
      many: batch => pending('many', [...batch]) as Promise<boolean>,
      written: 'ok',
    }, slots, maxBatch),
  }
}

const settle = () => new Promise(r => setImmediate(r))

t.test('alone when a slot is free; those that wait go together, at most maxBatch at once', async t => {
  const { calls, batcher } = runner()
  const b = batcher(1, 3)
  const first = b.submit(1)
  await settle()
  t.same(calls.map(c => [c.kind, c.items]), [['one', [1]]], 'an idle batcher sends a create at once, alone')
  const rest = [2, 3, 4, 5].map(n => b.submit(n))
  await settle()
  t.equal(calls.length, 1, 'nothing else while the slot is taken')
  calls[0]!.release('ok')
  t.equal(await first, 'ok')
  await settle()
  t.same(calls[1]!.items, [2, 3, 4], 'the next statement takes those that waited, up to maxBatch')
  t.equal(calls[1]!.kind, 'many')
  calls[1]!.release(true)
  await settle()
  t.same(calls[2]!.items, [5], 'then the rest')
  t.equal(calls[2]!.kind, 'one', 'a batch of one is a create alone')
  calls[2]!.release('ok')
  t.same(await Promise.all(rest), ['ok', 'ok', 'ok', 'ok'])
  t.same(b.stats, { alone: 2, batches: 1, batched: 3, undone: 0 }, 'counted for the metrics')
})

t.test('a batch that wrote nothing, or failed, hands each create back to run alone', async t => {
  for (const outcome of ['refused', 'error'] as const) {
    const { calls, batcher } = runner()
    const b = batcher(1, 10)
    const first = b.submit(0)
    const waiting = [1, 2, 3].map(n => b.submit(n).catch((err: Error) => `error: ${err.message}`))
    calls[0]!.release('ok')
    await first
    await settle()
    if (outcome === 'refused') calls[1]!.release(false)
    else calls[1]!.fail(new Error('connection reset'))
    await settle()
    t.same(calls.slice(2).map(c => [c.kind, c.items]), [['one', [1]], ['one', [2]], ['one', [3]]], `${outcome}: each alone, at once`)
    calls[2]!.release('ok')
    calls[3]!.release('tier-session-limit')
    calls[4]!.fail(new Error('gone'))
    t.same(await Promise.all(waiting), ['ok', 'tier-session-limit', 'error: gone'], `${outcome}: each its own answer`)
    t.same(b.stats, { alone: 4, batches: 0, batched: 0, undone: 1 }, `${outcome}: the batch counted as undone, its creates as alone`)
  }
})

t.test('slots: that many statements at once', async t => {
  const { calls, batcher } = runner()
  const b = batcher(2, 10)
  const all = [1, 2, 3, 4].map(n => b.submit(n))
  await settle()
  t.same(calls.map(c => c.items), [[1], [2]], 'two alone, the others wait')
  calls[1]!.release('ok')
  await settle()
  t.same(calls.map(c => c.items), [[1], [2], [3, 4]], 'the first free slot takes them together')
  calls[0]!.release('ok')
  calls[2]!.release(true)
  t.same(await Promise.all(all), ['ok', 'ok', 'ok', 'ok'])
})
