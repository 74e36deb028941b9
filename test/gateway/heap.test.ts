// gateway/heap.ts: the end-of-boot collection really collects, and leaves no global `gc` behind.
import t from 'tap'
import { collectGarbage } from '../../gateway/heap.js'

t.test('collectGarbage frees what nothing holds, and exposes no gc to the application', async t => {
  const hadGc = typeof (globalThis as { gc?: unknown }).gc === 'function' // tap's process may run with --expose-gc
  collectGarbage()
  const held = ((n: number) => {
    const garbage = Array.from({ length: n }, (_, i) => ({ i, s: `garbage ${i}` })) // dropped on return
    return garbage.length > 0 ? process.memoryUsage().heapUsed : 0
  })(400_000)
  const ms = collectGarbage()
  const after = process.memoryUsage().heapUsed
  t.ok(held - after > 20 * 2 ** 20, `the dropped objects are gone at once (${Math.round((held - after) / 2 ** 20)} MiB freed)`)
  t.type(ms, 'number')
  t.equal(typeof (globalThis as { gc?: unknown }).gc === 'function', hadGc, 'no global gc appeared')
})
