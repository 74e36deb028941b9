// Dashboard passwords (contract D3): scrypt N=2^17, r=8, p=1, per-user salt, constant-time compare.
// One hash takes ~128 MiB and a few hundred ms of a core. Signup is unauthenticated (contract 8.4),
// and 40 concurrent signups used to hold ~400 MiB and slow everything else down, so every hash
// waits for a slot of api/auth/hash-queue.ts: few at once, checks of existing accounts before the
// hashes of new ones, and a refusal (503 + Retry-After) at once rather than a long wait; and the
// hashes of new ones run at the lowest CPU priority (api/auth/signup-hasher.ts).
import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto'
import { inHashSlot, SCRYPT_CONCURRENCY, type HashLane } from './hash-queue.js'
import { signupScrypt } from './signup-hasher.js'

export { passwordQueueDepth, SCRYPT_CONCURRENCY, SCRYPT_QUEUE } from './hash-queue.js'

const N = 2 ** 17
const R = 8
const P = 1
const KEYLEN = 32
// 128 * N * r bytes are needed; leave headroom.
const MAXMEM = 256 * 1024 * 1024

/** A check hashes on libuv's thread pool; a signup on a low-priority worker (api/auth/signup-hasher.ts). */
function derive(password: string, salt: Buffer, opts: { N: number; r: number; p: number }, keylen: number, lane: HashLane): Promise<Buffer> {
  const o = { N: opts.N, r: opts.r, p: opts.p, maxmem: MAXMEM } satisfies ScryptOptions
  const text = password.normalize('NFC')
  return inHashSlot(lane, () => (lane === 'signup'
    ? signupScrypt(text, salt, keylen, o, SCRYPT_CONCURRENCY)
    : new Promise<Buffer>((resolve, reject) => { scrypt(text, salt, keylen, o, (err, key) => (err ? reject(err) : resolve(key))) })))
}

/**
 * `scrypt$N$r$p$<salt b64>$<hash b64>`: the parameters travel with the hash. A new account's
 * password by default (the signup lane); 'check' for a hash that guards an existing account.
 */
export async function hashPassword(password: string, lane: HashLane = 'signup'): Promise<string> {
  const salt = randomBytes(16)
  const key = await derive(password, salt, { N, r: R, p: P }, KEYLEN, lane)
  return `scrypt$${N}$${R}$${P}$${salt.toString('base64')}$${key.toString('base64')}`
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const parts = stored.split('$')
  if (parts.length !== 6 || parts[0] !== 'scrypt') return false
  const [n, r, p] = parts.slice(1, 4).map(Number) as [number, number, number]
  const salt = Buffer.from(parts[4]!, 'base64')
  const expected = Buffer.from(parts[5]!, 'base64')
  if (!n || !r || !p || expected.length === 0) return false
  const actual = await derive(password, salt, { N: n, r, p }, expected.length, 'check')
  return actual.length === expected.length && timingSafeEqual(actual, expected)
}

// A real hash of a random password: an unknown email costs the same time as a wrong password.
let dummy: Promise<string> | null = null
export async function burnPasswordCheck(password: string): Promise<void> {
  // A refusal (queue full) is not kept: the next check makes the dummy again.
  dummy ??= hashPassword(randomBytes(16).toString('hex'), 'check').catch((err: unknown) => { dummy = null; throw err })
  await verifyPassword(password, await dummy)
}
