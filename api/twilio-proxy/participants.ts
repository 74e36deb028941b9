// Adding a participant (docs/twilio-proxy.md): at most two live ones a session (80609), an
// identifier once a session (80103; once deleted, never again: 80612), a proxy number chosen by
// api/twilio-proxy/selection.ts, and the pair (identifier, proxy number) unique among active
// participants, which the database enforces (a concurrent create loses with 409 / 80623). The
// identifier is stored encrypted and hashed under the tenant's salt, and never logged.
import { hkdfSync } from 'node:crypto'
import type { E164 } from '../../engine/types.js'
import { createPhoneCipher, type PhoneCipher } from '../../sql/crypto.js'
import { uuidv7 } from '../../sql/vocabulary/ids.js'
import type { ServiceRow } from '../../sql/twilio-proxy.js'
import {
  deleteParticipant, insertParticipant, sessionParticipants, type NewParticipant, type ParticipantRow, type SessionRow,
} from '../../sql/twilio-proxy-sessions.js'
import { choiceInputs, linkNative, type ChoiceInputs, type ChoicePoolEntry } from '../../sql/twilio-proxy-create.js'
import type { Ctx } from './context.js'
import { invalidParam, rule, TwilioError } from './errors.js'
import { isOpen, MAX_DURATION_MINUTES } from './lifecycle.js'
import { numberSid } from './serialize.js'
import { selectNumber } from './selection.js'

export interface ParticipantInput { identifier?: string | undefined; friendlyName?: string | undefined; proxyIdentifier?: string | undefined; proxyIdentifierSid?: string | undefined }

const E164_RE = /^\+[1-9]\d{6,14}$/

const ciphers = new WeakMap<Buffer, PhoneCipher>()
/** Identifiers under their own key (derived from PHONE_KEY), apart from native session parties. */
export function identifierCipher(phoneKey: Buffer): PhoneCipher {
  let c = ciphers.get(phoneKey)
  if (!c) ciphers.set(phoneKey, (c = createPhoneCipher(Buffer.from(hkdfSync('sha256', phoneKey, Buffer.alloc(0), 'maskline twilio identifier v1', 32)))))
  return c
}

export function identifierOf(c: Ctx, p: ParticipantRow): string {
  return identifierCipher(c.services.phoneKey).decrypt(p.identifier_enc)
}

/** Participants of the create form (docs/twilio-proxy.md): one JSON object per field, or one JSON array; keys in any case. */
export function participantsParam(values: string[]): ParticipantInput[] {
  const out: ParticipantInput[] = []
  for (const v of values) {
    let parsed: unknown
    try {
      parsed = JSON.parse(v)
    } catch {
      throw invalidParam('Participants')
    }
    for (const item of Array.isArray(parsed) ? parsed : [parsed]) {
      if (!item || typeof item !== 'object' || Array.isArray(item)) throw invalidParam('Participants')
      const lower = new Map(Object.entries(item as Record<string, unknown>).map(([k, x]) => [k.toLowerCase(), x]))
      const str = (k: string) => {
        const x = lower.get(k)
        if (x === undefined || x === null) return undefined
        if (typeof x !== 'string') throw invalidParam('Participants')
        return x
      }
      out.push({ identifier: str('identifier'), friendlyName: str('friendlyname'), proxyIdentifier: str('proxyidentifier'), proxyIdentifierSid: str('proxyidentifiersid') })
    }
  }
  return out
}

/** A participant's input, checked without the store: its identifier (trimmed) and the identifier's hash. */
export interface CheckedParticipant { input: ParticipantInput; identifier: string; hash: string }

export function checkParticipant(c: Ctx, input: ParticipantInput): CheckedParticipant {
  const identifier = input.identifier?.trim()
  if (!identifier) throw invalidParam('Identifier')
  if (!E164_RE.test(identifier)) throw rule(80404, 'Participant Identifier is not a valid E.164 phone number')
  if (input.friendlyName !== undefined && input.friendlyName.length > 255) throw invalidParam('FriendlyName')
  return { input, identifier, hash: c.services.hashParty(c.auth.salt, identifier) }
}

/** The number a ProxyIdentifierSid names in the pool (80605 when none), else the ProxyIdentifier given. */
export function requestedNumber(pool: readonly ChoicePoolEntry[], input: ParticipantInput): string | undefined {
  const sid = input.proxyIdentifierSid
  if (sid === undefined) return input.proxyIdentifier
  const hit = pool.find(p => numberSid(p.number) === sid.slice(0, 2).toUpperCase() + sid.slice(2).toLowerCase())
  if (!hit) throw rule(80605, 'Proxy Identifier is not in the Service')
  return hit.number
}

/** What choosing a participant's number needs, read once (sql/twilio-proxy-create.ts). */
export interface Chooser { service: ServiceRow; inputs: ChoiceInputs }

/** The participant's number (selection.ts), or the refusal; `busy` grows when a concurrent create took a choice. */
export function chooseNumber(k: Chooser, who: CheckedParticipant, busy: Set<string>, requested: string | undefined, partner: string | undefined): string {
  const chosen = selectNumber({
    pool: k.inputs.pool, identifier: who.identifier, busy, requested, partner, behavior: k.service.number_selection_behavior,
    geoMatchLevel: k.service.geo_match_level, last: k.inputs.identifiers.get(who.hash)?.last ?? null })
  if (chosen instanceof TwilioError) throw chosen
  return chosen
}

export const busyOf = (k: Chooser, who: CheckedParticipant) => new Set(k.inputs.identifiers.get(who.hash)?.active ?? [])

export function newParticipant(c: Ctx, service: ServiceRow, sessionId: string, who: CheckedParticipant, number: string): NewParticipant {
  return {
    id: uuidv7(c.now), session_id: sessionId, service_id: service.id, tenant_id: c.auth.tenantId,
    identifier_enc: identifierCipher(c.services.phoneKey).encrypt(who.identifier), identifier_hash: who.hash,
    friendly_name: who.input.friendlyName ?? null, proxy_number: number, active: true, created_at: c.now,
  }
}

export const pairTakenRequested = () => rule(80604, 'The participant is already active on this proxy identifier in another session')
export const simultaneous = () => rule(80623, 'Simultaneous requests created the same participant; retry', 409)

export async function addParticipant(c: Ctx, service: ServiceRow, session: SessionRow, input: ParticipantInput): Promise<ParticipantRow> {
  const who = checkParticipant(c, input)
  if (!isOpen(session)) throw rule(80607, 'Session is closed and cannot be updated')
  const db = c.services.db
  const existing = await sessionParticipants(db, session.id)
  const live = existing.filter(p => p.date_deleted === null)
  if (existing.some(p => p.identifier_hash === who.hash)) {
    throw live.some(p => p.identifier_hash === who.hash)
      ? rule(80103, 'Participant is already in the session')
      : rule(80612, 'A deleted participant cannot be re-added to the session')
  }
  if (live.length >= 2) throw rule(80609, 'A session has at most 2 participants')
  const k: Chooser = { service, inputs: await choiceInputs(db, service.id, [who.hash]) }
  const requested = requestedNumber(k.inputs.pool, input)
  const busy = busyOf(k, who)
  for (let attempt = 0; attempt < 2; attempt++) {
    const chosen = chooseNumber(k, who, busy, requested, live[0]?.proxy_number)
    const row = await insertParticipant(db, newParticipant(c, service, session.id, who, chosen))
    if (row !== 'pair-taken') {
      if (live.length === 1) {
        try {
          await openNativeFor(c, session, live[0]!, row, who.identifier)
        } catch (err) {
          await deleteParticipant(db, row.id) // the engine refused the pair: the participant is not added
          throw err
        }
      }
      return row
    }
    if (requested !== undefined) throw pairTakenRequested()
    busy.add(chosen) // a concurrent create took it: once more without it
  }
  throw simultaneous()
}

/**
 * The second participant is in: the native session, pinned on both numbers, carries the traffic;
 * the façade session is linked to it in the native create's own transaction. The session row.
 */
export async function openNativeFor(c: Ctx, session: SessionRow, first: ParticipantRow, second: ParticipantRow, secondIdentifier: string): Promise<SessionRow> {
  const link = { nativeId: uuidv7(c.now), sessionId: session.id, agentId: first.id, customerId: second.id }
  let linked: SessionRow | undefined
  const nativeId = await c.deps.native.open(c.auth.tenantId, {
    agent: { phone: identifierOf(c, first) as E164, proxy: first.proxy_number as E164 },
    customer: { phone: secondIdentifier as E164, proxy: second.proxy_number as E164 },
    channels: session.mode === 'message-only' ? ['sms'] : session.mode === 'voice-only' ? ['voice'] : ['voice', 'sms'],
    // The façade's expiry (api/twilio-proxy/lifecycle.ts) ends it; the native cap is only a backstop.
    maxDurationMinutes: MAX_DURATION_MINUTES,
    id: link.nativeId,
    within: async tx => { linked = await linkNative(tx, link, c.now) },
  })
  if (!nativeId) return session
  return linked ?? await linkNative(c.services.db, { ...link, nativeId }, c.now)
}
