// Dashboard passwords (DECISIONS 3): scrypt N=2^17, r=8, p=1, per-user salt, constant-time compare.
// One hash takes ~128 MiB and a few hundred ms of a core. Issue 19: signup is unauthenticated,
// and 40 concurrent signups used to hold ~400 MiB and slow everything else down, so:
// - at most SCRYPT_CONCURRENCY hashes run at once, leaving a core to the event loop (provider
//   callbacks are answered there, in microseconds, and must not wait behind password hashing);
// - at most SCRYPT_QUEUE wait behind them; past that a password endpoint answers 503 with a
//   Retry-After of about how long the queue takes to drain, at once, without hashing.
import { availableParallelism } from 'node:os'
import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto'
import { ApiProblem } from '../route.js'

const N = 2 ** 17
const R = 8
const P = 1
const KEYLEN = 32
// 128 * N * r bytes are needed; leave headroom.
const MAXMEM = 256 * 1024 * 1024
export const SCRYPT_CONCURRENCY = Math.max(1, Math.min(2, availableParallelism() - 1))
export const SCRYPT_QUEUE = 16

let running = 0
const waiting: (() => void)[] = []
/** Moving average of one hash, for Retry-After. */
let hashMs = 500

/** Hashes running and waiting (tests and the bench read it). */
export function passwordQueueDepth(): number {
  return running + waiting.length
}

async function derive(password: string, salt: Buffer, opts: { N: number; r: number; p: number }, keylen: number): Promise<Buffer> {
  if (running >= SCRYPT_CONCURRENCY) {
    if (waiting.length >= SCRYPT_QUEUE) {
      const seconds = Math.max(1, Math.ceil(((waiting.length + running) * hashMs) / SCRYPT_CONCURRENCY / 1000))
      throw new ApiProblem('unavailable', 'Too many password checks in progress; retry after the Retry-After delay', { headers: { 'retry-after': String(seconds) } })
    }
    await new Promise<void>(resolve => waiting.push(resolve))
  }
  running++
  const t0 = performance.now()
  try {
    return await new Promise<Buffer>((resolve, reject) => {
      const o: ScryptOptions = { N: opts.N, r: opts.r, p: opts.p, maxmem: MAXMEM }
      scrypt(password.normalize('NFC'), salt, keylen, o, (err, key) => (err ? reject(err) : resolve(key)))
    })
  } finally {
    hashMs = hashMs * 0.8 + (performance.now() - t0) * 0.2
    running--
    waiting.shift()?.()
  }
}

/** `scrypt$N$r$p$<salt b64>$<hash b64>`: the parameters travel with the hash. */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16)
  const key = await derive(password, salt, { N, r: R, p: P }, KEYLEN)
  return `scrypt$${N}$${R}$${P}$${salt.toString('base64')}$${key.toString('base64')}`
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const parts = stored.split('$')
  if (parts.length !== 6 || parts[0] !== 'scrypt') return false
  const [n, r, p] = parts.slice(1, 4).map(Number) as [number, number, number]
  const salt = Buffer.from(parts[4]!, 'base64')
  const expected = Buffer.from(parts[5]!, 'base64')
  if (!n || !r || !p || expected.length === 0) return false
  const actual = await derive(password, salt, { N: n, r, p }, expected.length)
  return actual.length === expected.length && timingSafeEqual(actual, expected)
}

// A real hash of a random password: an unknown email costs the same time as a wrong password.
let dummy: Promise<string> | null = null
export async function burnPasswordCheck(password: string): Promise<void> {
  // A refusal (queue full) is not kept: the next check makes the dummy again.
  dummy ??= hashPassword(randomBytes(16).toString('hex')).catch((err: unknown) => { dummy = null; throw err })
  await verifyPassword(password, await dummy)
}
