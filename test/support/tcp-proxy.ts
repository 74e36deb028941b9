// A TCP proxy in front of a real server, to take it away and give it back without stopping it
// (other test files share the server): `down()` cuts every open connection and refuses new ones,
// `up()` forwards again; `retarget()` sends new connections to another server (a load balancer
// moving to the node that is still alive).
import { createConnection, createServer, type Server, type Socket } from 'node:net'

export interface TcpProxy {
  port: number
  down(): void
  up(): void
  /** New connections go to `to` from now on; open ones are left as they are. */
  retarget(to: { host: string; port: number }): void
  close(): Promise<void>
}

export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  let isUp = true
  const open = new Set<Socket>()
  let current = target
  const server: Server = createServer(client => {
    if (!isUp) { client.destroy(); return }
    const upstream = createConnection(current)
    open.add(client).add(upstream)
    const end = () => { client.destroy(); upstream.destroy(); open.delete(client); open.delete(upstream) }
    client.on('error', end).on('close', end)
    upstream.on('error', end).on('close', end)
    client.pipe(upstream)
    upstream.pipe(client)
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as { port: number }).port
  return {
    port,
    down() {
      isUp = false
      for (const s of open) s.destroy()
      open.clear()
    },
    up() { isUp = true },
    retarget(to) { current = to },
    close: () => new Promise<void>(resolve => {
      for (const s of open) s.destroy()
      server.close(() => resolve())
    }),
  }
}
