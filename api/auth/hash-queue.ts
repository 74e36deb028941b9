// Who hashes a password next (api/auth/passwords.ts). One hash takes a few hundred ms of a core,
// so at most SCRYPT_CONCURRENCY run at once, leaving a core to the event loop (provider callbacks
// are answered there, in microseconds). Two lanes wait for a free slot:
// - `check`: a password check guarding an existing account (dashboard login, the dummy hash an
//   unknown email burns). Always served first: a login waits for at most the hashes already
//   running, never behind signups. At most SCRYPT_QUEUE wait; past that, 503 at once.
// - `signup`: the hash of a new account's password (unauthenticated: a flood from many addresses
//   passes the per-address throttle). Bounded by time: a signup that would wait longer than the
//   signup wait bound (SIGNUP_MAX_WAIT_MS) is refused at once, and one still waiting when the
//   bound is reached (logins went first) is refused then: 503 with Retry-After, never held open.
import { availableParallelism } from 'node:os'
import { ApiProblem } from '../route.js'

export const SCRYPT_CONCURRENCY = Math.max(1, Math.min(2, availableParallelism() - 1))
export const SCRYPT_QUEUE = 16
export const DEFAULT_SIGNUP_MAX_WAIT_MS = 2_000

export type HashLane = 'check' | 'signup'

interface Waiter { go(): void }

let running = 0
const checks: Waiter[] = []
const signups: Waiter[] = []
let signupMaxWaitMs = DEFAULT_SIGNUP_MAX_WAIT_MS
/** Moving average of one hash, for the wait estimate and Retry-After. */
let hashMs = 500

/** SIGNUP_MAX_WAIT_MS (gateway/config.ts); one value per process, as the hashing cores are. */
export function setSignupMaxWait(ms: number): void {
  signupMaxWaitMs = ms
}

/** Hashes running and waiting (tests and the bench read it). */
export function passwordQueueDepth(): number {
  return running + checks.length + signups.length
}

/** About how long a hash queued behind `ahead` others waits for its slot. */
function waitMs(ahead: number): number {
  return ((ahead + running) * hashMs) / SCRYPT_CONCURRENCY
}

function refuse(ms: number): ApiProblem {
  const seconds = Math.max(1, Math.ceil(ms / 1000))
  return new ApiProblem('unavailable', 'Too many password checks in progress; retry after the Retry-After delay', { headers: { 'retry-after': String(seconds) } })
}

/** Resolves once the caller holds a hashing slot; `release` must follow. Throws the 503. */
function acquire(lane: HashLane): Promise<void> | void {
  // A slot is handed straight to the next waiter on release, so a free one means nobody waits.
  if (running < SCRYPT_CONCURRENCY) {
    running++
    return
  }
  if (lane === 'check') {
    if (checks.length >= SCRYPT_QUEUE) throw refuse(waitMs(checks.length))
    return new Promise(resolve => checks.push({ go: resolve }))
  }
  const expected = waitMs(checks.length + signups.length)
  if (expected > signupMaxWaitMs) throw refuse(expected)
  return new Promise((resolve, reject) => {
    const w: Waiter = { go: () => { clearTimeout(timer); resolve() } }
    const timer = setTimeout(() => {
      signups.splice(signups.indexOf(w), 1)
      reject(refuse(waitMs(checks.length + signups.length)))
    }, signupMaxWaitMs)
    signups.push(w)
  })
}

function release(ms: number): void {
  hashMs = hashMs * 0.8 + ms * 0.2
  const next = checks.shift() ?? signups.shift()
  if (next) next.go() // the slot passes on: `running` stays
  else running--
}

/** Runs `hash` in a slot of `lane`'s turn. */
export async function inHashSlot<T>(lane: HashLane, hash: () => Promise<T>): Promise<T> {
  await acquire(lane)
  const t0 = performance.now()
  try {
    return await hash()
  } finally {
    release(performance.now() - t0)
  }
}
