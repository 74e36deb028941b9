// The drain request of gateway/stream/deferred-upgrades.ts on a real uWS app: every deferred
// upgrade runs inside uWS's callback for it; with no listener to ask, each is told it cannot be.
import t from 'tap'
import uWS from 'uWebSockets.js'
import { deferredUpgrades } from '../../gateway/stream/deferred-upgrades.js'

async function listening(app: uWS.TemplatedApp): Promise<{ port: number; close: () => void }> {
  const ls = await new Promise<uWS.us_listen_socket>((resolve, reject) => app.listen('127.0.0.1', 0, s => (s ? resolve(s) : reject(new Error('listen failed')))))
  return { port: uWS.us_socket_local_port(ls), close: () => uWS.us_listen_socket_close(ls) }
}

const outcome = (d: ReturnType<typeof deferredUpgrades>) => new Promise<string>(resolve => d.defer(() => resolve('upgraded'), () => resolve('unavailable')))

t.test('deferred upgrades run from the drain request, queued ones together', async t => {
  const app = uWS.App()
  let port: number | null = null
  const d = deferredUpgrades(app, () => (port === null ? null : `http://127.0.0.1:${port}`))
  const l = await listening(app)
  port = l.port
  t.teardown(() => { d.close(); l.close() })
  t.same(await Promise.all([outcome(d), outcome(d), outcome(d)]), ['upgraded', 'upgraded', 'upgraded'])
  t.equal(d.count(), 3)
  t.same(await outcome(d), 'upgraded', 'and again later')
  t.equal(d.count(), 4)
})

t.test('without a listener to ask, a deferred upgrade is refused, never left waiting', async t => {
  const app = uWS.App()
  const notYet = deferredUpgrades(app, () => null)
  t.equal(await outcome(notYet), 'unavailable', 'not bound yet')
  const l = await listening(uWS.App())
  const port = l.port
  l.close() // a port nobody listens on: the request fails
  const closed = deferredUpgrades(uWS.App(), () => `http://127.0.0.1:${port}`)
  t.equal(await outcome(closed), 'unavailable', 'listener gone')
  t.equal(closed.count(), 0)
  notYet.close()
  closed.close()
})
