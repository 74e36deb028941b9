// Sandbox provider (DECISIONS 1): the embedded default. Nothing leaves the process; the caller
// records the SMS as DELIVERED. It keeps no copy of the numbers or the text and logs nothing.
import { randomUUID } from 'node:crypto'
import type { SendResult, SmsMessage, SmsProvider } from './provider.js'

export class SandboxProvider implements SmsProvider {
  readonly name: string
  #sent = 0

  constructor(name = 'sandbox') {
    this.name = name
  }

  /** How many messages were "sent" (a count only, for tests and metrics). */
  get sentCount(): number {
    return this.#sent
  }

  async sendSms(_msg: SmsMessage): Promise<SendResult> {
    this.#sent++
    return { providerMessageId: `sandbox-${randomUUID()}` }
  }
}
