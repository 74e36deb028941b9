// The composition root's pieces (docs/architecture.md, "Wiring"): the shutdown stack, the event
// hub of committed changes, and the route handlers' view of the service with no optional part.
import t from 'tap'
import { createShutdownStack, once } from '../../gateway/shutdown.js'
import { createHub, emitTenantChange } from '../../sql/hub.js'
import type { Services } from '../../api/services.js'

/** The keys of T that may be absent or undefined. */
type OptionalKeys<T> = { [K in keyof T]-?: undefined extends T[K] ? K : never }[keyof T]
// A compile error (the tsc gate) when a member of Services becomes optional again: what the
// composition root leaves out must fail to compile, not throw on the first request that needs it.
// (ServiceConfig's trustedProxies is configuration, optional by nature; it is not a member here.)
const noOptionalMember: [OptionalKeys<Services>] extends [never] ? true : false = true

t.test('Services has no optional member', async t => {
  t.equal(noOptionalMember, true)
})

t.test('the shutdown stack runs last-deferred first, each step once, past a step that throws', async t => {
  const ran: string[] = []
  const s = createShutdownStack()
  s.defer(() => { ran.push('database') })
  s.defer(async () => { await new Promise(r => setTimeout(r, 5)); ran.push('records') })
  s.defer(() => { ran.push('bus'); throw new Error('bus close failed') })
  s.defer(() => { ran.push('listener') })
  const first = s.run()
  t.equal(s.run(), first, 'a second run is the first')
  await first
  t.same(ran, ['listener', 'bus', 'records', 'database'])
  t.throws(() => s.defer(() => {}), /under way/, 'nothing is deferred once it runs')
})

t.test('once: the first call\'s promise is every call\'s', async t => {
  let calls = 0
  const close = once(async () => { calls++; return calls })
  t.same(await Promise.all([close(), close()]), [1, 1])
  t.equal(calls, 1)
})

t.test('the hub calls listeners in the order they subscribed; a tenant change waits for what they hand over', async t => {
  const hub = createHub()
  const heard: string[] = []
  hub.on('records', () => { heard.push('counter') })
  hub.on('records', () => { heard.push('stream') })
  hub.emit('records', [])
  t.same(heard, ['counter', 'stream'])

  let released = false
  let release!: () => void
  hub.on('tenant', (id, waitUntil) => {
    heard.push(`tenant ${id}`)
    waitUntil(new Promise<void>(r => { release = () => { released = true; r() } }))
  })
  hub.on('tenant', (_id, waitUntil) => waitUntil(Promise.reject(new Error('a listener failed'))))
  let answered = false
  const change = emitTenantChange(hub, 't1').then(() => { answered = true })
  await new Promise(r => setTimeout(r, 10))
  t.notOk(answered, 'not answered while the bus has not taken it')
  release()
  await change
  t.ok(released && answered, 'answered once it has; a failed listener does not fail the change')
  t.same(heard.slice(2), ['tenant t1'])
})
