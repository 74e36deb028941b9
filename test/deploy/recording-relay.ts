// A TCP relay between nginx and the service that keeps what nginx sent on each upstream
// connection: the test reads the requests as the service got them (request line, header set,
// keep-alive reuse, the WebSocket handshake), which the service's answers alone do not show.
import { createConnection, createServer, type Socket } from 'node:net'

export interface UpstreamRequest {
  /** Which upstream connection carried it (0, 1, ... in the order they opened). */
  connection: number
  method: string
  target: string
  version: string
  /** Header names lower-cased; values as sent. */
  headers: Array<[string, string]>
}

export interface RecordingRelay {
  /** host:port to give nginx as its upstream. */
  address: string
  /** Every request head seen so far, in order. */
  requests(): UpstreamRequest[]
  close(): Promise<void>
}

/** The request heads on one connection, read in sequence: head, Content-Length bytes of body, next. */
function parseRequests(bytes: string, connection: number): UpstreamRequest[] {
  const out: UpstreamRequest[] = []
  let pos = 0
  for (;;) {
    const end = bytes.indexOf('\r\n\r\n', pos)
    if (end === -1) return out
    const [line, ...fields] = bytes.slice(pos, end).split('\r\n')
    const m = /^([A-Z]+) (\S+) (HTTP\/\d\.\d)$/.exec(line!)
    if (!m) return out
    const headers = fields.map(l => {
      const colon = l.indexOf(':')
      return [l.slice(0, colon).toLowerCase(), l.slice(colon + 1).trim()] as [string, string]
    })
    out.push({ connection, method: m[1]!, target: m[2]!, version: m[3]!, headers })
    if (headers.some(([k]) => k === 'upgrade')) return out // WebSocket frames follow, not requests
    pos = end + 4 + Number(headers.find(([k]) => k === 'content-length')?.[1] ?? 0)
  }
}

export async function startRecordingRelay(target: { host: string; port: number }): Promise<RecordingRelay> {
  const sent: string[] = [] // per connection, latin1 so byte offsets are kept
  const open = new Set<Socket>()
  const server = createServer(client => {
    const n = sent.push('') - 1
    const upstream = createConnection(target)
    open.add(client).add(upstream)
    const end = () => { client.destroy(); upstream.destroy(); open.delete(client); open.delete(upstream) }
    client.on('error', end).on('close', end)
    upstream.on('error', end).on('close', end)
    client.on('data', (d: Buffer) => { sent[n] += d.toString('latin1') })
    client.pipe(upstream)
    upstream.pipe(client)
  })
  await new Promise<void>(resolve => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as { port: number }
  return {
    address: `127.0.0.1:${port}`,
    requests: () => sent.flatMap(parseRequests),
    close: () => new Promise<void>(resolve => {
      for (const s of open) s.destroy()
      server.close(() => resolve())
    }),
  }
}
