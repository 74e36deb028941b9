// Serves an embedded PGlite over the Postgres wire protocol on 127.0.0.1, so the embedded mode
// runs the very same slonik/pg code as a real Postgres (one code path, two backends).
//
// Why not PGLiteSocketServer as is: PGlite is ONE backend session shared by every connection.
// The stock query queue serializes single protocol messages and pins a connection only while an
// explicit transaction is open, so the Parse/Bind/Execute/Sync batches of two connections can
// interleave (as soon as a message spans TCP packets) and one connection then binds its values to
// the other's unnamed statement: errors or silently wrong rows (electric-sql/pglite#1046,
// reproduced here with 100 kB parameters). And a throw inside its queue loop leaves the queue
// stuck forever. We keep pglite-socket's PGLiteSocketHandler (framing, SSL refusal, cleanup) and
// give it a queue that owns the backend per connection from its first message until the backend
// reports ReadyForQuery 'I' (idle, no transaction), i.e. a whole extended-protocol batch or a
// whole transaction runs without other connections' messages in between.
//
// Caveats of the shared session (they do not matter for our SQL, they would for other uses):
// SET, session advisory locks, prepared statements, LISTEN and temp tables are shared by all
// connections; a connection idle inside a transaction blocks every other connection, so it is
// cut after `idleInTransactionMs` (like Postgres' idle_in_transaction_session_timeout).
import { createServer, type Socket } from 'node:net'
import type { PGlite } from '@electric-sql/pglite'
import { PGLiteSocketHandler, type PGLiteSocketHandlerOptions } from '@electric-sql/pglite-socket'

const SYNC = new Uint8Array([0x53, 0, 0, 0, 4])

function simpleQuery(text: string): Uint8Array {
  const body = Buffer.from(`${text}\0`, 'utf8')
  const msg = Buffer.alloc(5 + body.length)
  msg[0] = 0x51 // 'Q'
  msg.writeInt32BE(4 + body.length, 1)
  body.copy(msg, 5)
  return msg
}
const ROLLBACK = simpleQuery('ROLLBACK')

interface Item {
  handlerId: number
  message: Uint8Array
  onData: (data: Uint8Array) => void
  resolve: (bytes: number) => void
  reject: (err: Error) => void
}

/** The three methods PGLiteSocketHandler calls on its queue. */
class SessionQueue {
  private queue: Item[] = []
  private processing = false
  /** The connection that owns the backend until it is idle again. */
  private owner: number | null = null
  private inFlight: number | null = null
  /** Connections that went away while owning the backend (or mid-message). */
  private readonly dead = new Set<number>()
  private idleTimer: NodeJS.Timeout | null = null
  private ownerActivity = 0
  private readonly db: PGlite
  private readonly idleInTransactionMs: number
  private readonly onStuck: (handlerId: number) => void
  private readonly onError: (code: string) => void

  constructor(db: PGlite, idleInTransactionMs: number, onStuck: (handlerId: number) => void, onError: (code: string) => void) {
    this.db = db
    this.idleInTransactionMs = idleInTransactionMs
    this.onStuck = onStuck
    this.onError = onError
  }

  enqueue(handlerId: number, message: Uint8Array, onData: (data: Uint8Array) => void): Promise<number> {
    return new Promise((resolve, reject) => {
      this.queue.push({ handlerId, message, onData, resolve, reject })
      void this.process()
    })
  }

  getQueueLength(): number {
    return this.queue.length
  }

  clearQueueForHandler(handlerId: number): void {
    this.queue = this.queue.filter(i => {
      if (i.handlerId !== handlerId) return true
      i.reject(new Error('Handler disconnected'))
      return false
    })
    if (this.owner === handlerId || this.inFlight === handlerId) this.dead.add(handlerId)
  }

  async clearTransactionIfNeeded(_handlerId: number): Promise<void> {
    // The reset of a dead owner happens inside the processing loop, so it cannot race with a
    // message of that connection that is still executing.
    void this.process()
  }

  /** Sync ends an unfinished extended-protocol batch; ROLLBACK ends an open transaction. */
  private async reset(): Promise<void> {
    await this.db.runExclusive(async () => {
      await this.db.execProtocolRaw(SYNC)
      if (this.db.isInTransaction()) await this.db.execProtocolRaw(ROLLBACK)
    })
  }

  private async process(): Promise<void> {
    if (this.processing) return
    this.processing = true
    try {
      for (;;) {
        if (this.owner !== null && this.dead.has(this.owner)) {
          await this.reset()
          this.dead.delete(this.owner)
          this.owner = null
        }
        const idx = this.owner === null ? (this.queue.length ? 0 : -1) : this.queue.findIndex(i => i.handlerId === this.owner)
        if (idx === -1) break
        const item = this.queue.splice(idx, 1)[0]!
        this.inFlight = item.handlerId
        this.ownerActivity++
        let bytes = 0
        // The last 6 bytes written: ReadyForQuery is 'Z', int32 5, status.
        const tail = new Uint8Array(6)
        let failed: Error | null = null
        try {
          await this.db.runExclusive(() => this.db.execProtocolRawStream(item.message, {
            onRawData: (d: Uint8Array) => {
              bytes += d.length
              if (d.length >= 6) tail.set(d.subarray(d.length - 6))
              else if (d.length > 0) { tail.copyWithin(0, d.length); tail.set(d, 6 - d.length) }
              item.onData(d)
            },
          }))
        } catch (err) {
          failed = err instanceof Error ? err : new Error(String(err))
        }
        this.inFlight = null
        const idle = tail[0] === 0x5a && tail[4] === 5 && tail[5] === 0x49 // 'Z' … 'I'
        if (this.dead.has(item.handlerId)) {
          if (!idle) await this.reset()
          this.dead.delete(item.handlerId)
          this.owner = null
        } else {
          this.owner = idle || failed ? null : item.handlerId
        }
        if (failed) {
          this.onError('embedded-exec')
          item.reject(failed)
        } else {
          item.resolve(bytes)
        }
      }
    } catch {
      // reset() failed: the embedded database is unusable; report and let callers time out.
      this.onError('embedded-reset')
    } finally {
      this.processing = false
    }
    this.armIdleGuard()
  }

  /** Cuts a connection that holds the backend in a transaction while others wait. */
  private armIdleGuard(): void {
    if (this.idleTimer || this.owner === null || this.queue.length === 0) return
    const owner = this.owner
    const seen = this.ownerActivity
    this.idleTimer = setTimeout(() => {
      this.idleTimer = null
      if (this.owner === owner && this.ownerActivity === seen && this.queue.some(i => i.handlerId !== owner)) {
        this.onError('idle-in-transaction')
        this.onStuck(owner)
      }
      this.armIdleGuard()
    }, this.idleInTransactionMs)
    this.idleTimer.unref()
  }

  stop(): void {
    if (this.idleTimer) clearTimeout(this.idleTimer)
    this.idleTimer = null
  }
}

export interface EmbeddedServer {
  readonly host: string
  readonly port: number
  close(): Promise<void>
}

export async function serveEmbedded(db: PGlite, opts: {
  maxConnections?: number
  idleInTransactionMs?: number
  onError?: (code: string) => void
} = {}): Promise<EmbeddedServer> {
  const onError = opts.onError ?? (() => {})
  const maxConnections = opts.maxConnections ?? 32
  const handlers = new Map<number, PGLiteSocketHandler>()
  const sockets = new Set<Socket>()
  const queue = new SessionQueue(db, opts.idleInTransactionMs ?? 30_000, id => {
    void handlers.get(id)?.detach(true)
  }, onError)
  await db.waitReady

  const server = createServer(socket => {
    if (handlers.size >= maxConnections) {
      socket.destroy()
      return
    }
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
    const handler = new PGLiteSocketHandler({
      queryQueue: queue as unknown as PGLiteSocketHandlerOptions['queryQueue'],
      closeOnDetach: true,
    })
    handlers.set(handler.handlerId, handler)
    const forget = () => handlers.delete(handler.handlerId)
    handler.addEventListener('close', forget)
    handler.addEventListener('error', forget)
    handler.attach(socket).catch(() => {
      forget()
      socket.destroy()
    })
  })
  server.on('error', () => onError('embedded-server'))
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject)
      resolve()
    })
  })
  const address = server.address()
  if (!address || typeof address !== 'object') throw new Error('embedded server has no address')

  return {
    host: '127.0.0.1',
    port: address.port,
    async close() {
      queue.stop()
      await Promise.allSettled([...handlers.values()].map(h => h.detach(true)))
      for (const s of sockets) s.destroy()
      await new Promise<void>(resolve => server.close(() => resolve()))
    },
  }
}
