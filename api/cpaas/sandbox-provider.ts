// Sandbox provider (contract D1): the embedded default. Nothing leaves the process; the caller
// records the SMS as DELIVERED. It keeps no copy of the numbers or the text, and logs each message
// it "sends" by its sandbox id only, so a developer running `npm start` sees that a forward
// happened without the log ever holding a number or the text (contract D1, D8).
import { randomUUID } from 'node:crypto'
import type { SendResult, SmsMessage, SmsProvider } from './provider.js'

/**
 * Where the sandbox reports a forward: typed to take the sandbox id and nothing of the message, so
 * no number or text can reach it (and, like every CPaaS module, this one imports no logger).
 */
export interface SandboxLog {
  info(fields: { provider: string; providerMessageId: string }, msg: string): void
}

export class SandboxProvider implements SmsProvider {
  readonly name: string
  readonly #log: SandboxLog | undefined
  #sent = 0

  constructor(name = 'sandbox', log?: SandboxLog) {
    this.name = name
    this.#log = log
  }

  /** How many messages were "sent" (a count only, for tests and metrics). */
  get sentCount(): number {
    return this.#sent
  }

  async sendSms(_msg: SmsMessage): Promise<SendResult> {
    this.#sent++
    const providerMessageId = `sandbox-${randomUUID()}`
    // The message's fields are never passed to the logger, not even to be redacted.
    this.#log?.info({ provider: this.name, providerMessageId }, 'sandbox sms not sent (recorded as delivered)')
    return { providerMessageId }
  }
}
