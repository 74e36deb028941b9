// SMS opt-out (contract D11, carrier rules for US long codes): the keywords a party may text to a
// proxy, the set of parties opted out of each proxy, and what an inbound SMS should do given both.
// Pure: the set is filled by the gateway (boot load, its own writes, the bus, reconciliation) and
// read on the SMS path, which never waits on I/O for it.
import type { RouteDecision } from './route-decision.js'

export const SMS_KEYWORDS = {
  STOP: 'stop', STOPALL: 'stop', UNSUBSCRIBE: 'stop', CANCEL: 'stop', END: 'stop', QUIT: 'stop',
  START: 'start', UNSTOP: 'start',
  HELP: 'help', INFO: 'help',
} as const
export type SmsKeyword = (typeof SMS_KEYWORDS)[keyof typeof SMS_KEYWORDS]

export const DEFAULT_SMS_OPT_OUT_TEXT = 'You have been unsubscribed. Reply START to resubscribe.'
export const DEFAULT_SMS_HELP_TEXT = 'This number relays messages for a service you use. Reply STOP to unsubscribe, START to resubscribe.'

/** The longest keyword (UNSUBSCRIBE): a longer trimmed message is never one, and is not case-folded. */
const KEYWORD_MAX = 11

/** The keyword a message is, when the whole message (trimmed, any case) is one; else null. */
export function smsKeyword(text: string): SmsKeyword | null {
  const word = text.trim()
  if (word.length > KEYWORD_MAX) return null
  const upper = word.toUpperCase()
  return Object.hasOwn(SMS_KEYWORDS, upper) ? SMS_KEYWORDS[upper as keyof typeof SMS_KEYWORDS] : null
}

/**
 * Parties (by party hash, never a number) opted out of messages from a proxy of a tenant. Keyed by
 * tenant and proxy first, so a message on a proxy nobody opted out of costs one Map probe and no
 * party hash (an HMAC) at all.
 */
export class OptOutSet {
  readonly #byProxy = new Map<string, Set<string>>()

  static key(tenantId: string, proxy: string): string {
    return `${tenantId}|${proxy}`
  }

  add(tenantId: string, proxy: string, partyHash: string): void {
    const k = OptOutSet.key(tenantId, proxy)
    let set = this.#byProxy.get(k)
    if (!set) this.#byProxy.set(k, set = new Set())
    set.add(partyHash)
  }

  delete(tenantId: string, proxy: string, partyHash: string): void {
    const k = OptOutSet.key(tenantId, proxy)
    const set = this.#byProxy.get(k)
    if (!set) return
    set.delete(partyHash)
    if (set.size === 0) this.#byProxy.delete(k)
  }

  set(tenantId: string, proxy: string, partyHash: string, optedOut: boolean): void {
    if (optedOut) this.add(tenantId, proxy, partyHash)
    else this.delete(tenantId, proxy, partyHash)
  }

  /** Anyone opted out of this proxy of this tenant: only then is a recipient's hash worth computing. */
  any(tenantId: string, proxy: string): boolean {
    return this.#byProxy.has(OptOutSet.key(tenantId, proxy))
  }

  has(tenantId: string, proxy: string, partyHash: string): boolean {
    return this.#byProxy.get(OptOutSet.key(tenantId, proxy))?.has(partyHash) ?? false
  }

  get size(): number {
    let n = 0
    for (const s of this.#byProxy.values()) n += s.size
    return n
  }
}

/**
 * What an inbound SMS does, given the routing decision and the sender's keyword:
 * - `stop`: the sender is opted out of this proxy (the tenant that holds or last held it);
 *   the message is not forwarded and a confirmation goes back, once;
 * - `start`: the sender, opted out, opts back in; not forwarded. A START from a party who is not
 *   opted out is an ordinary message (forwarded when a session routes it);
 * - `help`: the tenant's help text goes back; not forwarded;
 * - `blocked`: a message a session would forward to a party opted out of this proxy: dropped,
 *   recorded FAILED with reason opted_out, reported by sms.blocked;
 * - `forward` / `drop`: as before (contract D5).
 * `senderOptedOut` and `recipientOptedOut` are asked lazily: each costs a party hash.
 */
export type SmsAction =
  | { kind: 'stop' | 'help'; tenantId: string }
  | { kind: 'start'; tenantId: string }
  | { kind: 'blocked'; decision: Extract<RouteDecision, { kind: 'connect' }> }
  | { kind: 'forward'; decision: Extract<RouteDecision, { kind: 'connect' }> }
  | { kind: 'drop' }

export function smsAction(
  dec: RouteDecision,
  keyword: SmsKeyword | null,
  optedOut: { sender(tenantId: string): boolean; recipient(dec: Extract<RouteDecision, { kind: 'connect' }>): boolean },
): SmsAction {
  // A session that does not carry SMS (contract D10 channels) still hears its parties' keywords.
  const tenantId = dec.kind === 'connect' || dec.kind === 'direction-not-allowed' || dec.kind === 'channel-not-allowed' ? dec.tenantId
    : dec.kind === 'no-session' ? dec.tenant?.id ?? null : null
  if (keyword !== null && tenantId !== null) {
    if (keyword === 'stop' || keyword === 'help') return { kind: keyword, tenantId }
    if (optedOut.sender(tenantId)) return { kind: 'start', tenantId }
  }
  if (dec.kind !== 'connect') return { kind: 'drop' }
  return optedOut.recipient(dec) ? { kind: 'blocked', decision: dec } : { kind: 'forward', decision: dec }
}
