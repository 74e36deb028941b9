// The hashes of new accounts' passwords run on worker threads at the lowest CPU priority (nice 19),
// so that on a busy machine the scheduler hands a core to a login's check (libuv's thread pool, at
// the process's own priority) before a signup's hash: a flood of signups from many addresses never
// makes an existing user's sign-in slower than its own hash (api/auth/hash-queue.ts decides who
// hashes when; this decides who gets the core while both hash). On Linux a thread's nice value is
// its own: os.setPriority(0, …) inside the worker lowers that thread alone. Where the system refuses
// it, the worker hashes at normal priority (the lanes of hash-queue.ts still hold).
// One worker per signup slot (SCRYPT_CONCURRENCY), started on the first signup, holding the process
// open only while it hashes.
import { Worker } from 'node:worker_threads'

export interface ScryptParams { N: number; r: number; p: number; maxmem: number }

/** CommonJS run by each worker (eval): one synchronous scrypt per message, on this thread. */
const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads')
const { scryptSync } = require('node:crypto')
let niced = true
try { require('node:os').setPriority(0, 19) } catch { niced = false }
parentPort.postMessage({ niced })
parentPort.on('message', m => {
  try {
    const key = scryptSync(m.password, Buffer.from(m.salt), m.keylen, m.params)
    parentPort.postMessage({ id: m.id, key })
  } catch (err) {
    parentPort.postMessage({ id: m.id, error: String(err && err.message) })
  }
})
`

interface Pending { resolve(key: Buffer): void; reject(err: Error): void }

class HashWorker {
  readonly #worker: Worker
  readonly #pending = new Map<number, Pending>()
  #next = 0
  /** Whether the worker runs at nice 19 (null until it said so). */
  niced: boolean | null = null

  constructor() {
    this.#worker = new Worker(WORKER_SOURCE, { eval: true })
    this.#worker.on('message', (m: { niced?: boolean; id?: number; key?: Uint8Array; error?: string }) => {
      if (m.niced !== undefined) { this.niced = m.niced; return }
      const p = this.#pending.get(m.id!)
      if (!p) return
      this.#pending.delete(m.id!)
      if (this.#pending.size === 0) this.#worker.unref()
      if (m.key) p.resolve(Buffer.from(m.key))
      else p.reject(new Error(m.error ?? 'scrypt failed'))
    })
    this.#worker.on('error', err => this.#failAll(err))
    this.#worker.on('exit', () => this.#failAll(new Error('password hash worker exited')))
    this.#worker.unref() // idle; held while a hash runs (after the listeners: attaching one refs it again)
  }

  get busy(): number { return this.#pending.size }

  hash(password: string, salt: Buffer, keylen: number, params: ScryptParams): Promise<Buffer> {
    const id = this.#next++
    return new Promise<Buffer>((resolve, reject) => {
      this.#pending.set(id, { resolve, reject })
      this.#worker.ref()
      this.#worker.postMessage({ id, password, salt, keylen, params })
    })
  }

  #failAll(err: Error): void {
    for (const p of this.#pending.values()) p.reject(err)
    this.#pending.clear()
    const i = workers.indexOf(this)
    if (i !== -1) workers.splice(i, 1) // the next signup starts a new one
  }
}

const workers: HashWorker[] = []

/** scrypt of a new account's password on a low-priority worker (the least busy of `slots`). */
export function signupScrypt(password: string, salt: Buffer, keylen: number, params: ScryptParams, slots: number): Promise<Buffer> {
  let w = workers.reduce<HashWorker | undefined>((best, x) => (best === undefined || x.busy < best.busy ? x : best), undefined)
  if (w === undefined || (w.busy > 0 && workers.length < slots)) {
    w = new HashWorker()
    workers.push(w)
  }
  return w.hash(password, salt, keylen, params)
}

/** Whether the signup workers started so far run at nice 19 (tests; null before the first says). */
export function signupWorkersNiced(): Array<boolean | null> {
  return workers.map(w => w.niced)
}
