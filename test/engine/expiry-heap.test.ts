// The deadline heap against a sorted list: random pushes, removals and re-arms keep the minimum
// and every item's own position right.
import t from 'tap'
import fc from 'fast-check'
import { ExpiryHeap } from '../../engine/expiry-heap.js'

interface Item { id: number; heapPos: number; expiresAt: number }

type Op = { op: 'push'; at: number } | { op: 'remove'; k: number } | { op: 'update'; k: number; at: number } | { op: 'pop' }

const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ op: fc.constant('push' as const), at: fc.integer({ min: 0, max: 50 }) }),
  fc.record({ op: fc.constant('remove' as const), k: fc.nat() }),
  fc.record({ op: fc.constant('update' as const), k: fc.nat(), at: fc.integer({ min: 0, max: 50 }) }),
  fc.record({ op: fc.constant('pop' as const) }),
)

t.test('behaves like a sorted list', async t => {
  fc.assert(fc.property(fc.array(opArb, { maxLength: 200 }), ops => {
    const heap = new ExpiryHeap<Item>()
    let live: Item[] = []
    let next = 0
    for (const o of ops) {
      if (o.op === 'push') {
        const item = { id: next++, heapPos: -1, expiresAt: o.at }
        heap.push(item)
        live.push(item)
      } else if (o.op === 'pop') {
        const top = heap.peek()
        if (live.length === 0) { if (top !== undefined) return false; continue }
        const min = Math.min(...live.map(i => i.expiresAt))
        if (top === undefined || top.expiresAt !== min) return false
        heap.remove(top)
        live = live.filter(i => i !== top)
      } else if (live.length > 0) {
        const item = live[o.k % live.length]!
        if (o.op === 'remove') {
          heap.remove(item)
          heap.remove(item) // twice is harmless
          if (item.heapPos !== -1) return false
          live = live.filter(i => i !== item)
        } else {
          item.expiresAt = o.at
          heap.update(item)
        }
      }
      if (heap.size !== live.length) return false
    }
    const order = live.map(i => i.expiresAt).sort((a, b) => a - b)
    const drained: number[] = []
    for (let top = heap.peek(); top !== undefined; top = heap.peek()) {
      drained.push(top.expiresAt)
      heap.remove(top)
    }
    return JSON.stringify(drained) === JSON.stringify(order)
  }), { numRuns: 300 })
  t.pass('property holds')
})

t.test('update and remove of an item not in the heap are ignored', async t => {
  const heap = new ExpiryHeap<Item>()
  const stray = { id: 1, heapPos: -1, expiresAt: 5 }
  heap.update(stray)
  heap.remove(stray)
  t.equal(heap.size, 0)
})
