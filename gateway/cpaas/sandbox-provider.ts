// Sandbox provider (DECISIONS 1): the embedded default. Nothing leaves the process; the caller
// records the SMS as DELIVERED. It keeps no copy of the numbers or the text, and logs each message
// it "sends" by its sandbox id only, so a developer running `npm start` sees that a forward
// happened without the log ever holding a number or the text (DECISIONS 8).
import { randomUUID } from 'node:crypto'
import type { Logger } from 'pino'
import type { SendResult, SmsMessage, SmsProvider } from './provider.js'

export class SandboxProvider implements SmsProvider {
  readonly name: string
  readonly #log: Pick<Logger, 'info'> | undefined
  #sent = 0

  constructor(name = 'sandbox', log?: Pick<Logger, 'info'>) {
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
