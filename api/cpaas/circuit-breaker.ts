// Per-provider circuit breaker (contract D5; contract 3.2 names the states, 4.11 exposes them):
// CLOSED → OPEN after 5 consecutive failures or timeouts (3 s); OPEN → HALF_OPEN after 30 s;
// HALF_OPEN admits one trial request: success → CLOSED, failure → OPEN again.
//
// Ours, not a library: the maintained majors need Node 22 (cockatiel 4, opossum 10; the runtime is
// 20), and what /v1/health/cpaas reports (state, openedAt, lastError code) is the contract's. It
// costs ~4 µs a call (3 s timer included) on sends that take milliseconds.
//
// Time comes from the injected `now` (epoch ms), so tests step through 30 s without waiting.
// OPEN → HALF_OPEN is evaluated lazily when the state is read. The 3 s timeout is the only
// real timer: a hanging call has to be cut off in real time.
import { circuitOpenError, timeoutError, toProviderError, type ProviderError } from './provider.js'

export type BreakerState = 'CLOSED' | 'OPEN' | 'HALF_OPEN'

export interface BreakerSnapshot {
  name: string
  state: BreakerState
  /** ISO 8601 time the breaker last opened; null while CLOSED. */
  openedAt: string | null
  /** Code of the last failure (`provider-timeout`, `provider-http-503`), never provider text. */
  lastError: string | null
}

export interface BreakerOptions {
  name: string
  failureThreshold?: number
  openMs?: number
  /** Calls slower than this fail with `provider-timeout`; 0 disables the timer. */
  timeoutMs?: number
  now?: () => number
  onTransition?: (t: { name: string; from: BreakerState; to: BreakerState; lastError: string | null }) => void
}

const BREAKER_DEFAULTS = { failureThreshold: 5, openMs: 30_000, timeoutMs: 3_000 } as const

export class CircuitBreaker {
  readonly name: string
  readonly #threshold: number
  readonly #openMs: number
  readonly #timeoutMs: number
  readonly #now: () => number
  readonly #onTransition: BreakerOptions['onTransition']
  #state: BreakerState = 'CLOSED'
  #failures = 0
  #openedAt: number | null = null
  #lastError: string | null = null
  #trialInFlight = false

  constructor(opts: BreakerOptions) {
    this.name = opts.name
    this.#threshold = opts.failureThreshold ?? BREAKER_DEFAULTS.failureThreshold
    this.#openMs = opts.openMs ?? BREAKER_DEFAULTS.openMs
    this.#timeoutMs = opts.timeoutMs ?? BREAKER_DEFAULTS.timeoutMs
    this.#now = opts.now ?? Date.now
    this.#onTransition = opts.onTransition
  }

  get state(): BreakerState {
    if (this.#state === 'OPEN' && this.#openedAt !== null && this.#now() - this.#openedAt >= this.#openMs) {
      this.#move('HALF_OPEN')
    }
    return this.#state
  }

  get consecutiveFailures(): number {
    return this.#failures
  }

  /** Would a request be admitted right now? (HALF_OPEN: only while no trial is in flight.) */
  canRequest(): boolean {
    const s = this.state
    return s === 'CLOSED' || (s === 'HALF_OPEN' && !this.#trialInFlight)
  }

  snapshot(): BreakerSnapshot {
    const state = this.state
    return {
      name: this.name,
      state,
      openedAt: state === 'CLOSED' || this.#openedAt === null ? null : new Date(this.#openedAt).toISOString(),
      lastError: this.#lastError,
    }
  }

  /**
   * Runs `fn` through the breaker. Not admitted → throws `provider-circuit-open` (nothing was
   * attempted). Errors are normalized to ProviderError; those with `providerFault` count as
   * failures, the rest (a 4xx refusal) prove the provider is up and count as successes.
   */
  async execute<T>(fn: () => Promise<T>): Promise<T> {
    const state = this.state
    if (state === 'OPEN' || (state === 'HALF_OPEN' && this.#trialInFlight)) throw circuitOpenError()
    const trial = state === 'HALF_OPEN'
    if (trial) this.#trialInFlight = true
    try {
      const value = await this.#withTimeout(fn)
      this.#success()
      return value
    } catch (err) {
      const perr = toProviderError(err)
      if (perr.providerFault) this.#failure(perr.code)
      else this.#success()
      throw perr
    } finally {
      if (trial) this.#trialInFlight = false
    }
  }

  #withTimeout<T>(fn: () => Promise<T>): Promise<T> {
    if (this.#timeoutMs <= 0) return fn()
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => reject(timeoutError()), this.#timeoutMs)
      fn().then(
        v => { clearTimeout(timer); resolve(v) },
        (e: unknown) => { clearTimeout(timer); reject(e as ProviderError) },
      )
    })
  }

  #success(): void {
    this.#failures = 0
    if (this.#state !== 'CLOSED') {
      this.#openedAt = null
      this.#move('CLOSED')
    }
  }

  #failure(code: string): void {
    this.#lastError = code
    this.#failures++
    if (this.#state === 'HALF_OPEN' || (this.#state === 'CLOSED' && this.#failures >= this.#threshold)) {
      this.#openedAt = this.#now()
      this.#move('OPEN')
    }
  }

  #move(to: BreakerState): void {
    const from = this.#state
    if (from === to) return
    this.#state = to
    this.#onTransition?.({ name: this.name, from, to, lastError: this.#lastError })
  }
}
