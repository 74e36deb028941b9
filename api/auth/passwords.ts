// Dashboard passwords (DECISIONS 3): scrypt N=2^17, r=8, p=1, per-user salt, constant-time compare.
// One hash takes ~128 MiB and a few hundred ms, so at most SCRYPT_CONCURRENCY run at once: a
// burst of signups or logins queues instead of exhausting memory.
import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto'

const N = 2 ** 17
const R = 8
const P = 1
const KEYLEN = 32
// 128 * N * r bytes are needed; leave headroom.
const MAXMEM = 256 * 1024 * 1024
export const SCRYPT_CONCURRENCY = 2

let running = 0
const waiting: (() => void)[] = []

async function derive(password: string, salt: Buffer, opts: { N: number; r: number; p: number }, keylen: number): Promise<Buffer> {
  if (running >= SCRYPT_CONCURRENCY) await new Promise<void>(resolve => waiting.push(resolve))
  running++
  try {
    return await new Promise<Buffer>((resolve, reject) => {
      const o: ScryptOptions = { N: opts.N, r: opts.r, p: opts.p, maxmem: MAXMEM }
      scrypt(password.normalize('NFC'), salt, keylen, o, (err, key) => (err ? reject(err) : resolve(key)))
    })
  } finally {
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
  dummy ??= hashPassword(randomBytes(16).toString('hex'))
  await verifyPassword(password, await dummy)
}
