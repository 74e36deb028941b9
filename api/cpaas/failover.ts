// Primary/backup SMS sending (contract 4.11, contract D5). Each provider has its own circuit breaker.
//
// Routing: the primary, unless its breaker refuses (OPEN, or HALF_OPEN with the trial in flight);
// then the backup.
//
// When a send to the primary fails and a backup exists:
// - ambiguous failure (timeout, connection lost after the request went out, 504): NOT resent.
//   The primary may have accepted the message; resending through the backup could deliver the
//   same SMS twice, which for a masked conversation is worse than one message lost and reported
//   (the error reaches the caller, which records the SMS as FAILED). The failure still counts on
//   the primary's breaker, so after five of them new sends go to the backup.
// - unambiguous provider fault (connection refused, 5xx other than 504, 429, 401/403): the primary
//   did not take the message, so it is sent once through the backup.
// - refusal of the request itself (400, 422, ...): rethrown; the backup would refuse it too.
import { CircuitBreaker, type BreakerOptions, type BreakerSnapshot } from './circuit-breaker.js'
import { circuitOpenError, toProviderError, type SendResult, type SmsMessage, type SmsProvider } from './provider.js'

/** Breaker settings shared by both providers (name comes from each provider; give them distinct names). */
export type FailoverOptions = Omit<BreakerOptions, 'name'>

export interface FailoverSendResult extends SendResult {
  /** Which provider took the message (its `name`). */
  providerName: string
}

/** One fixed chain, primary then backup (the service composes a ProviderRouter, which picks the
 * chain by the number a message is sent from: provider-router.ts). */
export class FailoverProvider implements SmsProvider {
  readonly name = 'failover'
  readonly primary: SmsProvider
  readonly backup: SmsProvider | undefined
  readonly primaryBreaker: CircuitBreaker
  readonly backupBreaker: CircuitBreaker | undefined

  constructor(primary: SmsProvider, backup?: SmsProvider, opts: FailoverOptions = {}) {
    this.primary = primary
    this.backup = backup
    this.primaryBreaker = new CircuitBreaker({ ...opts, name: primary.name })
    this.backupBreaker = backup ? new CircuitBreaker({ ...opts, name: backup.name }) : undefined
  }

  async sendSms(msg: SmsMessage): Promise<FailoverSendResult> {
    const { primary, backup, primaryBreaker, backupBreaker } = this
    return sendThrough(backup && backupBreaker ? [[primary, primaryBreaker], [backup, backupBreaker]] : [[primary, primaryBreaker]], msg)
  }

  /** For GET /v1/health/cpaas: `{ providers: health(), timestamp }`. */
  health(): BreakerSnapshot[] {
    const out = [this.primaryBreaker.snapshot()]
    if (this.backupBreaker) out.push(this.backupBreaker.snapshot())
    return out
  }
}

/** A provider and its breaker, in the order they are tried. */
export type Link = readonly [SmsProvider, CircuitBreaker]

/**
 * Sends through the first link whose breaker lets a request through; when that send fails
 * unambiguously on the provider's side (see the header), once more through the next one, and so on.
 * Every link refusing (breakers open): `provider-circuit-open`, nothing was sent.
 */
export async function sendThrough(chain: readonly Link[], msg: SmsMessage): Promise<FailoverSendResult> {
  let last: unknown = null
  for (const [provider, breaker] of chain) {
    if (!breaker.canRequest()) continue
    try {
      const r = await breaker.execute(() => provider.sendSms(msg))
      return { providerMessageId: r.providerMessageId, providerName: provider.name }
    } catch (err) {
      const perr = toProviderError(err)
      if (perr.ambiguous || !perr.providerFault) throw perr
      last = perr
    }
  }
  throw last ?? circuitOpenError()
}
