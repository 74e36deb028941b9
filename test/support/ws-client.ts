// A minimal WebSocket client (RFC 6455) over node:http's upgrade, for the stream tests and the
// fan-out bench. Node 20 has no global WebSocket, and `ws` is only a transitive dependency
// (without types); this one also gives direct access to the TCP socket, so a test can stop
// reading (a stalled consumer) or see exactly which subprotocol the server answered.
import http from 'node:http'
import { randomBytes } from 'node:crypto'
import type { Socket } from 'node:net'

export interface WsClient {
  /** The Sec-WebSocket-Protocol the server answered, or null. */
  protocol: string | null
  messages: string[]
  socket: Socket
  /** Called for every text message (after it is pushed to `messages`, unless keepMessages is false). */
  onMessage: ((text: string) => void) | null
  waitForMessages(n: number, timeoutMs?: number): Promise<void>
  /** Resolves with the close code (1006 when the connection dropped without a close frame). */
  closed: Promise<number>
  /** The reason of the server's close frame ('' until one came). */
  closeReason: string
  pingsReceived: number
  close(code?: number): void
}

export interface HandshakeRefused { status: number; body: string; headers: http.IncomingHttpHeaders }

export function encodeFrame(opcode: number, payload: Buffer, mask = true): Buffer {
  const len = payload.length
  const head = len < 126 ? 2 : len < 65536 ? 4 : 10
  const out = Buffer.alloc(head + (mask ? 4 : 0) + len)
  out[0] = 0x80 | opcode
  if (len < 126) out[1] = len
  else if (len < 65536) { out[1] = 126; out.writeUInt16BE(len, 2) }
  else { out[1] = 127; out.writeBigUInt64BE(BigInt(len), 2) }
  if (mask) {
    out[1]! |= 0x80
    const key = randomBytes(4)
    key.copy(out, head)
    for (let i = 0; i < len; i++) out[head + 4 + i] = payload[i]! ^ key[i & 3]!
  } else payload.copy(out, head)
  return out
}

/** Incremental parser of server frames (unmasked). */
export function createFrameParser(onFrame: (fin: boolean, opcode: number, payload: Buffer) => void) {
  let buf: Buffer = Buffer.alloc(0)
  return (chunk: Buffer) => {
    buf = buf.length ? Buffer.concat([buf, chunk]) : chunk
    for (;;) {
      if (buf.length < 2) return
      const fin = (buf[0]! & 0x80) !== 0
      const opcode = buf[0]! & 0x0f
      const masked = (buf[1]! & 0x80) !== 0
      let len = buf[1]! & 0x7f
      let off = 2
      if (len === 126) { if (buf.length < 4) return; len = buf.readUInt16BE(2); off = 4 }
      else if (len === 127) { if (buf.length < 10) return; len = Number(buf.readBigUInt64BE(2)); off = 10 }
      const maskOff = off
      if (masked) off += 4
      if (buf.length < off + len) return
      let payload = buf.subarray(off, off + len)
      if (masked) {
        const copy = Buffer.alloc(len)
        for (let i = 0; i < len; i++) copy[i] = payload[i]! ^ buf[maskOff + (i & 3)]!
        payload = copy
      }
      buf = buf.subarray(off + len)
      onFrame(fin, opcode, payload)
    }
  }
}

export function connectWs(
  url: string,
  opts: { headers?: Record<string, string>; protocols?: string[]; keepMessages?: boolean } = {},
): Promise<WsClient> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = {
      connection: 'Upgrade',
      upgrade: 'websocket',
      'sec-websocket-version': '13',
      'sec-websocket-key': randomBytes(16).toString('base64'),
      ...opts.headers,
    }
    if (opts.protocols?.length) headers['sec-websocket-protocol'] = opts.protocols.join(', ')
    const req = http.request(url, { headers, agent: false })
    req.on('response', res => {
      const chunks: Buffer[] = []
      res.on('data', c => chunks.push(c))
      res.on('end', () => reject({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString(), headers: res.headers } satisfies HandshakeRefused))
    })
    req.on('error', reject)
    req.on('upgrade', (res, socket, head) => {
      socket.setNoDelay(true)
      const keep = opts.keepMessages ?? true
      const waiters: Array<{ n: number; done: () => void }> = []
      let fragments: Buffer[] = []
      let closeCode = 1006
      let ending = ''
      const openedAt = performance.now()
      let resolveClosed!: (code: number) => void
      const client: WsClient = {
        protocol: (res.headers['sec-websocket-protocol'] as string | undefined) ?? null,
        messages: [],
        socket,
        onMessage: null,
        pingsReceived: 0,
        closeReason: '',
        closed: new Promise<number>(r => { resolveClosed = r }),
        waitForMessages(n, timeoutMs = 5_000) {
          if (client.messages.length >= n) return Promise.resolve()
          return new Promise((ok, fail) => {
            const w = { n, done: () => { clearTimeout(t); ok() } }
            const t = setTimeout(() => {
              waiters.splice(waiters.indexOf(w), 1)
              // Open or closed (and how) tells a service that stopped sending from one that hung up.
              const state = socket.destroyed ? `socket closed, close code ${closeCode}, ${ending || 'closed on this side'}` : 'socket open'
              fail(new Error(`ws: ${client.messages.length} of ${n} messages after ${timeoutMs} ms (${state}, ${client.pingsReceived} pings received)`))
            }, timeoutMs)
            waiters.push(w)
          })
        },
        close(code = 1000) {
          const p = Buffer.alloc(2)
          p.writeUInt16BE(code)
          if (!socket.destroyed) socket.write(encodeFrame(0x8, p))
          setTimeout(() => socket.destroy(), 100).unref()
        },
      }
      const parse = createFrameParser((fin, opcode, payload) => {
        if (opcode === 0x9) { client.pingsReceived++; socket.write(encodeFrame(0xa, payload)); return }
        if (opcode === 0xa) return
        if (opcode === 0x8) {
          closeCode = payload.length >= 2 ? payload.readUInt16BE(0) : 1005
          client.closeReason = payload.subarray(2).toString('utf8')
          if (!socket.destroyed) socket.end(encodeFrame(0x8, payload.subarray(0, 2)))
          return
        }
        fragments.push(payload)
        if (!fin) return
        const text = (fragments.length === 1 ? fragments[0]! : Buffer.concat(fragments)).toString('utf8')
        fragments = []
        if (keep) client.messages.push(text)
        client.onMessage?.(text)
        for (const w of [...waiters]) {
          if (client.messages.length >= w.n) { waiters.splice(waiters.indexOf(w), 1); w.done() }
        }
      })
      socket.on('data', parse)
      // How the connection ended, for a timeout's message: the server's FIN, an error (a reset), or
      // this side (the test's own close or destroy).
      socket.on('end', () => { ending ||= `FIN from the server after ${Math.round(performance.now() - openedAt)} ms` })
      socket.on('error', (err: NodeJS.ErrnoException) => { ending ||= `${err.code ?? err.message} after ${Math.round(performance.now() - openedAt)} ms` })
      socket.on('close', () => resolveClosed(closeCode))
      if (head.length) parse(head)
      resolve(client)
    })
    req.end()
  })
}
