// The native maskline session behind a façade session: once its second participant exists, one
// native session pinned on both participants' proxy numbers carries the calls and SMS (the agent
// is the first participant, on its number; the customer the second, on its own). Closing,
// deleting or expiring the façade session ends it. A Service's numbers are bound to the tenant:
// native allocation never hands them out.
import type { E164 } from '../../engine/types.js'
import type { Db } from '../../sql/transaction.js'
import { ApiProblem } from '../route.js'
import { rule, TwilioError } from './errors.js'

export interface PinnedParty { phone: E164; proxy: E164 }

export interface PinnedSessionRequest {
  agent: PinnedParty
  customer: PinnedParty
  channels: ('voice' | 'sms')[]
  maxDurationMinutes: number
  /** The native session's id, minted by the caller. */
  id: string
  /** The caller's writes (the link to its façade session), in the native create's transaction. */
  within: (tx: Db) => Promise<void>
}

export interface PinnedSessions {
  /** Opens the native session; its id (null: none was opened). */
  open(tenantId: string, req: PinnedSessionRequest): Promise<string | null>
  close(tenantId: string, nativeId: string): Promise<void>
  /** The number joins a Service of the tenant: 'taken' when another tenant holds or binds it. */
  bind(tenantId: string, number: string): Promise<'ok' | 'taken'>
  unbind(tenantId: string, number: string): Promise<void>
}

/** What the façade uses of the session runner (api/app/session-runner.ts, docs/dual-proxy.md). */
export interface PinnedEngine {
  createPinned(tenantId: string, body: {
    agentPhone: string; customerPhone: string; agentProxy: string; customerProxy: string; channels?: readonly ('voice' | 'sms')[]
    maxDurationMinutes?: number; inactivityTimeoutMinutes?: number | null; gracePeriodMinutes?: number
    id?: string; within?: (tx: Db) => Promise<void>
  }): Promise<{ id: string }>
  end(tenantId: string, id: string): Promise<unknown>
  /** Expires what is due now: with no grace period, an ended session releases its numbers at once. */
  expireDue(): Promise<unknown>
  bindNumber(tenantId: string, number: string): Promise<string>
  unbindNumber(tenantId: string, number: string): Promise<string>
}

export function enginePinnedSessions(e: PinnedEngine): PinnedSessions {
  return {
    async open(tenantId, r) {
      try {
        const rec = await e.createPinned(tenantId, {
          agentPhone: r.agent.phone, customerPhone: r.customer.phone, agentProxy: r.agent.proxy, customerProxy: r.customer.proxy,
          channels: r.channels, maxDurationMinutes: r.maxDurationMinutes, inactivityTimeoutMinutes: null,
          gracePeriodMinutes: 0, id: r.id, within: r.within,
        })
        return rec.id
      } catch (err) {
        throw nativeRefusal(err)
      }
    },
    async close(tenantId, nativeId) {
      // Already ended (its own expiry, an operator): nothing left to do.
      await e.end(tenantId, nativeId).catch((err: unknown) => { if (!(err instanceof ApiProblem)) throw err })
      // Its parties may be paired again on these numbers right away (a re-open, a new participant).
      await e.expireDue()
    },
    async bind(tenantId, number) {
      return (await e.bindNumber(tenantId, number)) === 'ok' ? 'ok' : 'taken'
    },
    async unbind(tenantId, number) {
      await e.unbindNumber(tenantId, number)
    },
  }
}

function nativeRefusal(err: unknown): unknown {
  if (!(err instanceof ApiProblem)) return err
  switch (err.slug as string) { // the pinned-create slugs (docs/dual-proxy.md)
    case 'proxy-in-use': return rule(80604, 'A participant is already live on its proxy number in another session')
    case 'proxy-unavailable': return rule(80601, 'Phone number not available')
    case 'tier-session-limit': return new TwilioError(429, 20429, 'Too many live sessions for this account\'s tier')
    case 'validation': return rule(80103, 'Participant is already in the session')
    default: return rule(80613, 'The session could not be started', 502)
  }
}
