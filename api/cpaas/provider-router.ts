// Outbound SMS for a deployment with more than one provider: each message goes out through the
// provider of the number it is sent from (proxy_numbers.provider, from NUMBER_POOL), failing over
// as failover.ts says:
// - 'telnyx': Telnyx, then the Telnyx backup account when one is configured;
// - 'twilio': Twilio;
// - 'twilio+telnyx' (a number both providers can send from, in that order of preference): Twilio,
//   then Telnyx (and its backup). Only numbers declared on both fail over across providers: a
//   provider refuses a `from` that is not one of its numbers, and a message refused is FAILED for
//   good where a provider that is down gets the message retried later.
// A number the pool does not know goes through the default provider's chain. Each provider has one
// circuit breaker, whichever numbers it serves.
import { CircuitBreaker, type BreakerSnapshot } from './circuit-breaker.js'
import { sendThrough, type FailoverOptions, type FailoverSendResult, type Link } from './failover.js'
import type { SmsMessage, SmsProvider } from './provider.js'

export interface ProviderRouterOptions {
  /** The providers able to send for each provider kind, in order (e.g. telnyx: [telnyx, telnyx-backup]). */
  kinds: Readonly<Record<string, readonly SmsProvider[]>>
  /** The kind of numbers the pool does not name (CPAAS_PROVIDER). */
  defaultKind: string
  /** proxy_numbers.provider of a number: one kind, or several joined by '+'. */
  numberProvider: (number: string) => string | undefined
  breaker?: FailoverOptions
}

export class ProviderRouter implements SmsProvider {
  readonly name = 'router'
  readonly #links = new Map<SmsProvider, Link>()
  readonly #kinds: Map<string, Link[]>
  readonly #chains = new Map<string, Link[]>()
  readonly #opts: ProviderRouterOptions

  constructor(opts: ProviderRouterOptions) {
    this.#opts = opts
    this.#kinds = new Map(Object.entries(opts.kinds).map(([kind, providers]) => [kind, providers.map(p => this.#link(p))]))
    if (!this.#kinds.get(opts.defaultKind)?.length) throw new Error(`ProviderRouter: no provider for the default kind ${opts.defaultKind}`)
  }

  /** The links a message from `number` goes through, in order (memoised per provider spelling). */
  chain(number: string): readonly Link[] {
    const spec = this.#opts.numberProvider(number) ?? this.#opts.defaultKind
    let chain = this.#chains.get(spec)
    if (chain === undefined) {
      chain = [...new Set(spec.split('+').flatMap(kind => this.#kinds.get(kind) ?? []))]
      if (chain.length === 0) chain = this.#kinds.get(this.#opts.defaultKind)!
      this.#chains.set(spec, chain)
    }
    return chain
  }

  sendSms(msg: SmsMessage): Promise<FailoverSendResult> {
    return sendThrough(this.chain(msg.from), msg)
  }

  /** For GET /v1/health/cpaas: one entry a provider. */
  health(): BreakerSnapshot[] {
    return [...this.#links.values()].map(([, breaker]) => breaker.snapshot())
  }

  #link(p: SmsProvider): Link {
    let link = this.#links.get(p)
    if (link === undefined) this.#links.set(p, link = [p, new CircuitBreaker({ ...this.#opts.breaker, name: p.name })])
    return link
  }
}
