// Mailboxes (style 3): per-key FIFO, one message to completion before the next, keys independent,
// a failure rejects its own caller only, and an idle key keeps no inbox.
import t from 'tap'
import { Mailboxes } from '../../engine/index.js'

const tick = () => new Promise<void>(resolve => setImmediate(resolve))

t.test('messages of one key run one at a time, in order', async t => {
  const boxes = new Mailboxes()
  const log: string[] = []
  let running = 0
  const job = (name: string, waits: number) => async () => {
    running++
    if (running > 1) log.push('OVERLAP')
    log.push(`start ${name}`)
    for (let k = 0; k < waits; k++) await tick()
    log.push(`end ${name}`)
    running--
    return name
  }
  const results = await Promise.all([boxes.run('s1', job('a', 3)), boxes.run('s1', job('b', 0)), boxes.run('s1', job('c', 1))])
  t.same(results, ['a', 'b', 'c'])
  t.same(log, ['start a', 'end a', 'start b', 'end b', 'start c', 'end c'])
})

t.test('different keys do not wait for each other', async t => {
  const boxes = new Mailboxes()
  const log: string[] = []
  let release!: () => void
  const blocked = boxes.run('slow', () => new Promise<void>(resolve => { release = resolve }).then(() => { log.push('slow') }))
  await boxes.run('fast', async () => { log.push('fast') })
  t.same(log, ['fast'])
  release()
  await blocked
  t.same(log, ['fast', 'slow'])
})

t.test('a throwing message rejects its own call only; the queue goes on', async t => {
  const boxes = new Mailboxes()
  const order: string[] = []
  const first = boxes.run('k', async () => { order.push('1'); throw new Error('boom') })
  const syncThrow = boxes.run('k', () => { order.push('2'); throw new Error('sync') })
  const third = boxes.run('k', async () => { order.push('3'); return 'fine' })
  await t.rejects(first, /boom/)
  await t.rejects(syncThrow, /sync/)
  t.equal(await third, 'fine')
  t.same(order, ['1', '2', '3'])
  await t.rejects(new Mailboxes().run('fresh', () => { throw new Error('first sync') }), /first sync/, 'a synchronous throw on an idle key rejects too')
})

t.test('an idle key keeps no inbox', async t => {
  const boxes = new Mailboxes()
  const p = boxes.run('a', async () => 1)
  boxes.run('b', async () => { throw new Error('x') }).catch(() => {})
  t.equal(boxes.size, 2)
  await p
  await tick()
  t.equal(boxes.size, 0)
  await boxes.run('a', async () => 2)
  await tick()
  t.equal(boxes.size, 0)
})
