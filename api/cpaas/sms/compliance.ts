// The SMS keywords and opt-outs on the provider's SMS callback (contract D11, carrier rules for US
// long codes). api/cpaas/callbacks/sms.ts asks `action` what an inbound message does (from memory: the
// routing decision, the opt-out set, at most two party hashes) and runs `run` for every outcome
// but a plain forward, under the same once-per-message-id guard as a forward:
// - STOP (STOPALL, UNSUBSCRIBE, CANCEL, END, QUIT): the sender is opted out of the proxy, durably
//   (api/cpaas/sms/opt-out.ts), then gets the tenant's confirmation once; not forwarded;
// - START (UNSTOP) from an opted-out sender: opted back in; not forwarded;
// - HELP (INFO): the tenant's help text goes back; not forwarded;
// - a message a session would forward to a party opted out of this proxy: not sent, recorded
//   FAILED with reason opted_out through the write-behind record writer (journaled before the
//   answer, like every record), and reported by sms.blocked. No usage: nothing was sent.
// No number, hash or text is logged.
import type { Logger } from 'pino'
import type { RouteDecision } from '../../../engine/index.js'
import {
  DEFAULT_SMS_HELP_TEXT, DEFAULT_SMS_OPT_OUT_TEXT, smsAction, smsKeyword, type SmsAction,
} from '../../../engine/sms-opt-out.js'
import { newEnvelope as event } from '../../../sql/vocabulary/event-envelope.js'
import { uuidv7 } from '../../../sql/vocabulary/ids.js'
import type { RecordWriter } from '../../../sql/records.js'
import type { OptOutKey } from '../../../sql/sms-opt-outs.js'
import { toProviderError, type SmsProvider } from '../provider.js'
import type { OptOuts } from './opt-out.js'
import type { TenantDirectory } from '../../app/tenant-directory.js'

export type SmsOutcome = 'done' | 'retry'

export interface SmsComplianceDeps {
  optOuts: OptOuts
  tenants: Pick<TenantDirectory, 'peek'>
  hashParty: (salt: Buffer, e164: string) => string
  records: Pick<RecordWriter, 'upsertSms' | 'sync'>
  provider: SmsProvider
  log: Logger
  now: () => number
}

export interface InboundSms { proxy: string; from: string; text: string; messageId: string; at: number }

export function createSmsCompliance(d: SmsComplianceDeps) {
  const set = d.optOuts.set

  function hashOf(tenantId: string, e164: string): string | null {
    const tenant = d.tenants.peek(tenantId)
    return tenant ? d.hashParty(tenant.salt, e164) : null
  }

  /** What the message does; from memory only (the SMS answer never waits on I/O for it). */
  function action(dec: RouteDecision, m: Pick<InboundSms, 'proxy' | 'from' | 'text'>): SmsAction {
    return smsAction(dec, smsKeyword(m.text), {
      sender: tenantId => {
        if (!set.any(tenantId, m.proxy)) return false
        const h = hashOf(tenantId, m.from)
        return h !== null && set.has(tenantId, m.proxy, h)
      },
      // The recipient gets the message from its own proxy (c.callerId: the one the sender texted
      // unless the session is dual-proxy, docs/dual-proxy.md), the one it would have opted out of.
      recipient: c => {
        if (!set.any(c.tenantId, c.callerId)) return false
        const h = hashOf(c.tenantId, c.to)
        return h !== null && set.has(c.tenantId, c.callerId, h)
      },
    })
  }

  /** Sends a text from the proxy back to the sender; 'retry' only when nothing was handed over. */
  async function reply(m: InboundSms, text: string, what: 'opt-out-confirmation' | 'help'): Promise<SmsOutcome | 'sent'> {
    try {
      await d.provider.sendSms({ from: m.proxy, to: m.from, text })
      return 'sent'
    } catch (err) {
      const e = toProviderError(err)
      // As a forward (api/cpaas/callbacks/sms-forward.ts): resending after a timeout could send it twice.
      if (e.providerFault && !e.ambiguous) {
        d.log.warn({ code: e.code, what }, 'sms reply not handed over; provider asked to retry')
        return 'retry'
      }
      d.log.warn({ code: e.code, what }, 'sms reply failed')
      return 'done'
    }
  }

  async function blocked(dec: Extract<RouteDecision, { kind: 'connect' }>, m: InboundSms): Promise<SmsOutcome> {
    const id = uuidv7(m.at)
    const claim = await d.records.upsertSms({
      id, sessionId: dec.sessionId, tenantId: dec.tenantId, providerMessageId: m.messageId,
      direction: dec.direction, status: 'FAILED', sentAt: m.at, reason: 'opted_out',
    }, {
      events: [event('sms.blocked', m.at, {
        sessionId: dec.sessionId, tenantId: dec.tenantId, proxyNumber: m.proxy, direction: dec.direction, smsId: id, status: 'FAILED', reason: 'opted_out',
      })],
    })
    if (!claim) return 'retry'
    await d.records.sync()
    return 'done'
  }

  /** Everything but a plain forward or a drop: settled once per inbound message id by the caller. */
  async function run(a: Exclude<SmsAction, { kind: 'forward' | 'drop' }>, m: InboundSms): Promise<SmsOutcome> {
    if (a.kind === 'blocked') return blocked(a.decision, m)
    const tenant = d.tenants.peek(a.tenantId)
    if (!tenant) return 'retry' // being reloaded (changed on another node): the provider asks again
    const key: OptOutKey = { tenantId: a.tenantId, proxy: m.proxy, partyHash: d.hashParty(tenant.salt, m.from) }
    try {
      if (a.kind === 'start') {
        await d.optOuts.start(key)
        d.log.info({ code: 'sms-opt-in', tenantId: a.tenantId }, 'sms party opted back in')
        return 'done'
      }
      if (a.kind === 'help') {
        const r = await reply(m, tenant.smsHelpText ?? DEFAULT_SMS_HELP_TEXT, 'help')
        return r === 'retry' ? 'retry' : 'done'
      }
      // STOP: committed before the confirmation is sent, so the confirmation never promises an
      // opt-out that a crash could lose.
      if (await d.optOuts.stop(key, m.messageId) === 'opted-out') return 'done'
      d.log.info({ code: 'sms-opt-out', tenantId: a.tenantId }, 'sms party opted out')
      const r = await reply(m, tenant.smsOptOutText ?? DEFAULT_SMS_OPT_OUT_TEXT, 'opt-out-confirmation')
      if (r === 'retry') return 'retry'
      // Not marked (Postgres gone since): a provider retry of this message would confirm again,
      // but this one is answered done, so the provider has no reason to retry it.
      await d.optOuts.confirmed(key, m.messageId).catch(() => d.log.warn({ code: 'sms-opt-out-confirmed' }, 'recoverable error'))
      return 'done'
    } catch {
      // Postgres could not take the opt-out (or its confirmation mark): the provider retries.
      d.log.warn({ code: 'sms-opt-out-store', tenantId: a.tenantId }, 'recoverable error')
      return 'retry'
    }
  }

  return { action, run }
}

export type SmsCompliance = ReturnType<typeof createSmsCompliance>
