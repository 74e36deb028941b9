// Adding a participant (docs/twilio-proxy.md): at most two live ones a session (80609), an
// identifier once a session (80103; once deleted, never again: 80612), a proxy number chosen by
// api/twilio-proxy/selection.ts, and the pair (identifier, proxy number) unique among active
// participants, which the database enforces (a concurrent create loses with 409 / 80623). The
// identifier is stored encrypted and hashed under the tenant's salt, and never logged.
import { hkdfSync } from 'node:crypto'
import type { E164 } from '../../engine/types.js'
import { createPhoneCipher, type PhoneCipher } from '../../sql/crypto.js'
import { uuidv7 } from '../../sql/vocabulary/ids.js'
import { servicePhoneNumbers, type ServiceRow } from '../../sql/twilio-proxy.js'
import {
  activeNumbersOf, deleteParticipant, insertParticipant, lastNumberOf, patchSession, sessionParticipants, type ParticipantRow, type SessionRow,
} from '../../sql/twilio-proxy-sessions.js'
import { linkNativeSession } from '../../sql/twilio-proxy-interactions.js'
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

export async function addParticipant(c: Ctx, service: ServiceRow, session: SessionRow, input: ParticipantInput): Promise<ParticipantRow> {
  const identifier = input.identifier?.trim()
  if (!identifier) throw invalidParam('Identifier')
  if (!E164_RE.test(identifier)) throw rule(80404, 'Participant Identifier is not a valid E.164 phone number')
  if (input.friendlyName !== undefined && input.friendlyName.length > 255) throw invalidParam('FriendlyName')
  if (!isOpen(session)) throw rule(80607, 'Session is closed and cannot be updated')
  const db = c.services.db
  const hash = c.services.hashParty(c.auth.salt, identifier)
  const existing = await sessionParticipants(db, session.id)
  const live = existing.filter(p => p.date_deleted === null)
  if (existing.some(p => p.identifier_hash === hash)) {
    throw live.some(p => p.identifier_hash === hash)
      ? rule(80103, 'Participant is already in the session')
      : rule(80612, 'A deleted participant cannot be re-added to the session')
  }
  if (live.length >= 2) throw rule(80609, 'A session has at most 2 participants')
  const pool = await servicePhoneNumbers(db, service.id)
  let requested = input.proxyIdentifier
  if (input.proxyIdentifierSid !== undefined) {
    const hit = pool.find(p => numberSid(p.number) === input.proxyIdentifierSid!.slice(0, 2).toUpperCase() + input.proxyIdentifierSid!.slice(2).toLowerCase())
    if (!hit) throw rule(80605, 'Proxy Identifier is not in the Service')
    requested = hit.number
  }
  const busy = new Set(await activeNumbersOf(db, hash))
  const last = await lastNumberOf(db, service.id, hash)
  for (let attempt = 0; attempt < 2; attempt++) {
    const chosen = selectNumber({
      pool, identifier, busy, requested, partner: live[0]?.proxy_number, behavior: service.number_selection_behavior, geoMatchLevel: service.geo_match_level, last })
    if (chosen instanceof TwilioError) throw chosen
    const row = await insertParticipant(db, {
      id: uuidv7(c.now), session_id: session.id, service_id: service.id, tenant_id: c.auth.tenantId,
      identifier_enc: identifierCipher(c.services.phoneKey).encrypt(identifier), identifier_hash: hash,
      friendly_name: input.friendlyName ?? null, proxy_number: chosen, active: true, created_at: c.now,
    })
    if (row !== 'pair-taken') {
      if (live.length === 1) {
        try {
          await openNativeFor(c, session, live[0]!, row, identifier)
        } catch (err) {
          await deleteParticipant(db, row.id) // the engine refused the pair: the participant is not added
          throw err
        }
      }
      return row
    }
    if (requested !== undefined) throw rule(80604, 'The participant is already active on this proxy identifier in another session')
    busy.add(chosen) // a concurrent create took it: once more without it
  }
  throw rule(80623, 'Simultaneous requests created the same participant; retry', 409)
}

/** The second participant is in: the native session, pinned on both numbers, carries the traffic. */
export async function openNativeFor(c: Ctx, session: SessionRow, first: ParticipantRow, second: ParticipantRow, secondIdentifier: string): Promise<void> {
  const nativeId = await c.deps.native.open(c.auth.tenantId, {
    agent: { phone: identifierOf(c, first) as E164, proxy: first.proxy_number as E164 },
    customer: { phone: secondIdentifier as E164, proxy: second.proxy_number as E164 },
    channels: session.mode === 'message-only' ? ['sms'] : session.mode === 'voice-only' ? ['voice'] : ['voice', 'sms'],
    // The façade's expiry (api/twilio-proxy/lifecycle.ts) ends it; the native cap is only a backstop.
    maxDurationMinutes: MAX_DURATION_MINUTES,
  })
  if (!nativeId) return
  await linkNativeSession(c.services.db, { nativeId, sessionId: session.id, agentId: first.id, customerId: second.id })
  await patchSession(c.services.db, session.id, { native_session_id: nativeId }, c.now)
}
