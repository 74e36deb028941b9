// Who hashes a password next (api/auth/passwords.ts). One hash takes a few hundred ms of a core,
// so at most SCRYPT_CONCURRENCY run at once, leaving a core to the event loop (provider callbacks
// are answered there, in microseconds). Two lanes:
// - `check`: a password check guarding an existing account (dashboard login, the dummy hash an
//   unknown email burns). Checks have SCRYPT_CONCURRENCY slots of their own, so a login never
//   waits behind a signup, not even one already hashing (that would make a login cost two hashes,
//   ~1.7 s on this machine's cores): while signups fill their slots a login runs on top, the only
//   time more than SCRYPT_CONCURRENCY hashes run. At most SCRYPT_QUEUE checks wait; past that, 503.
// - `signup`: the hash of a new account's password (unauthenticated: a flood from many addresses
//   passes the per-address throttle). A signup starts only while checks and signups together hold
//   fewer than SCRYPT_CONCURRENCY slots, and never before a waiting check. Bounded by time: a
//   signup that would wait longer than the signup wait bound (SIGNUP_MAX_WAIT_MS) is refused at
//   once, and one still waiting when the bound is reached is refused then: 503 with Retry-After,
//   never held open.
import { availableParallelism } from 'node:os'
import { ApiProblem } from '../route.js'

export const SCRYPT_CONCURRENCY = Math.max(1, Math.min(2, availableParallelism() - 1))
export const SCRYPT_QUEUE = 16
export const DEFAULT_SIGNUP_MAX_WAIT_MS = 2_000

export type HashLane = 'check' | 'signup'

interface Waiter { go(): void }

let runningChecks = 0
let runningSignups = 0
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
  return runningChecks + runningSignups + checks.length + signups.length
}

/** About how long a hash of `lane` queued behind `ahead` others waits for its slot. */
function waitMs(lane: HashLane, ahead: number): number {
  const running = lane === 'check' ? runningChecks : runningChecks + runningSignups
  return ((ahead + running) * hashMs) / SCRYPT_CONCURRENCY
}

function refuse(ms: number): ApiProblem {
  const seconds = Math.max(1, Math.ceil(ms / 1000))
  return new ApiProblem('unavailable', 'Too many password checks in progress; retry after the Retry-After delay', { headers: { 'retry-after': String(seconds) } })
}

const checkSlotFree = () => runningChecks < SCRYPT_CONCURRENCY
const signupSlotFree = () => runningChecks + runningSignups < SCRYPT_CONCURRENCY && checks.length === 0

/** Hands free slots to the waiters: checks first. */
function pump(): void {
  while (checks.length && checkSlotFree()) { runningChecks++; checks.shift()!.go() }
  while (signups.length && signupSlotFree()) { runningSignups++; signups.shift()!.go() }
}

/** Resolves once the caller holds a hashing slot; `release` must follow. Throws the 503. */
function acquire(lane: HashLane): Promise<void> | void {
  if (lane === 'check') {
    if (checks.length === 0 && checkSlotFree()) { runningChecks++; return }
    if (checks.length >= SCRYPT_QUEUE) throw refuse(waitMs(lane, checks.length))
    return new Promise(resolve => checks.push({ go: resolve }))
  }
  if (signups.length === 0 && signupSlotFree()) { runningSignups++; return }
  const expected = waitMs(lane, checks.length + signups.length)
  if (expected > signupMaxWaitMs) throw refuse(expected)
  return new Promise((resolve, reject) => {
    const w: Waiter = { go: () => { clearTimeout(timer); resolve() } }
    const timer = setTimeout(() => {
      signups.splice(signups.indexOf(w), 1)
      reject(refuse(waitMs(lane, checks.length + signups.length)))
    }, signupMaxWaitMs)
    signups.push(w)
  })
}

function release(lane: HashLane, ms: number): void {
  hashMs = hashMs * 0.8 + ms * 0.2
  if (lane === 'check') runningChecks--
  else runningSignups--
  pump()
}

/** Runs `hash` in a slot of `lane`'s turn. */
export async function inHashSlot<T>(lane: HashLane, hash: () => Promise<T>): Promise<T> {
  await acquire(lane)
  const t0 = performance.now()
  try {
    return await hash()
  } finally {
    release(lane, performance.now() - t0)
  }
}
