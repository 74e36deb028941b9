// Interactions (KI, docs/twilio-proxy.md): a read-only log of a session's messages and calls;
// MessageInteractions: a message the tenant sends a participant from its proxy number, through
// maskline's outbound SMS path (the provider and its failover). The text is sent, never stored:
// `data` is `{}` for a message.
import { uuidv7 } from '../../sql/vocabulary/ids.js'
import { patchSession, type SessionRow } from '../../sql/twilio-proxy-sessions.js'
import { deleteInteraction, getInteraction, insertMessageInteraction, listInteractions } from '../../sql/twilio-proxy-interactions.js'
import { queueInteractionCallback } from '../../sql/twilio-proxy-callbacks.js'
import type { Ctx } from './context.js'
import { invalidParam, notFound, rule } from './errors.js'
import { expiryOf, isOpen } from './lifecycle.js'
import { listBody, pageRequest } from './paging.js'
import { identifierOf } from './participants.js'
import { participantOf } from './participant-routes.js'
import { interactionJson } from './serialize.js'
import { sessionOf } from './session-routes.js'
import { derivedSid, uuidOf } from './sid.js'
import type { Table } from './router.js'

const MAX_BODY = 1600

/** An interaction happened now: in-progress, date_last_interaction, the Ttl counted from here. */
async function touch(c: Ctx, s: SessionRow): Promise<void> {
  const next = { ttl: s.ttl, date_expiry: s.date_expiry, date_started: s.date_started, date_last_interaction: c.now }
  await patchSession(c.services.db, s.id, { status: 'in-progress', date_last_interaction: c.now, expires_at: expiryOf(next, c.now) }, c.now)
}

export const interactionRoutes: Table = [
  ['Services/*/Sessions/*/Interactions', {
    async GET(c) {
      const { service, session } = await sessionOf(c)
      const req = pageRequest(c.params)
      const page = await listInteractions(c.services.db, session.id, req)
      const path = `/Services/${c.segs[1]}/Sessions/${c.segs[3]}/Interactions`
      return { status: 200, body: listBody('interactions', c.base, path, { ...req, tokenText: c.params.str('PageToken') }, page, page.rows.map(r => interactionJson(c.base, c.auth.accountSid, service.id, r))) }
    },
  }],
  ['Services/*/Sessions/*/Interactions/*', {
    async GET(c) {
      const { service, session } = await sessionOf(c)
      const id = uuidOf('KI', c.segs[5]!)
      const row = id ? await getInteraction(c.services.db, session.id, id) : null
      if (!row) throw notFound(c.path)
      return { status: 200, body: interactionJson(c.base, c.auth.accountSid, service.id, row) }
    },
    async DELETE(c) {
      const { session } = await sessionOf(c)
      const id = uuidOf('KI', c.segs[5]!)
      if (!id || !await deleteInteraction(c.services.db, session.id, id)) throw notFound(c.path)
      return { status: 204 }
    },
  }],
  ['Services/*/Sessions/*/Participants/*/MessageInteractions', {
    async POST(c) {
      const { service, session, participant } = await participantOf(c)
      const body = c.params.str('Body', MAX_BODY)
      if (body === undefined || body === '') throw invalidParam('Body')
      if (!isOpen(session)) throw rule(80607, 'Session is closed and cannot be updated')
      if (participant.date_deleted !== null) throw rule(80610, 'The participant was removed from the session')
      if (session.mode === 'voice-only') throw rule(80616, 'A voice-only session carries no messages')
      if (!c.deps.sendSms) throw rule(80613, 'Outbound messages are not configured', 502)
      let messageId: string
      try {
        messageId = await c.deps.sendSms(participant.proxy_number, identifierOf(c, participant), body)
      } catch {
        throw rule(80613, 'The provider refused the message', 502)
      }
      const id = uuidv7(c.now)
      await insertMessageInteraction(c.services.db, { id, sessionId: session.id, participantId: participant.id, status: 'sent', resourceSid: derivedSid('SM', messageId), now: c.now })
      await touch(c, session)
      if (service.callback_url) await queueInteractionCallback(c.services.db, { id: uuidv7(c.now), tenantId: c.auth.tenantId, sessionId: session.id, interactionId: id, now: c.now })
      const row = (await getInteraction(c.services.db, session.id, id))!
      return { status: 200, body: interactionJson(c.base, c.auth.accountSid, service.id, row, participant.id) }
    },
    async GET(c) {
      const { service, session, participant } = await participantOf(c)
      const req = pageRequest(c.params)
      const page = await listInteractions(c.services.db, session.id, req, participant.id)
      const path = `/Services/${c.segs[1]}/Sessions/${c.segs[3]}/Participants/${c.segs[5]}/MessageInteractions`
      return { status: 200, body: listBody('interactions', c.base, path, { ...req, tokenText: c.params.str('PageToken') }, page, page.rows.map(r => interactionJson(c.base, c.auth.accountSid, service.id, r, participant.id))) }
    },
  }],
  ['Services/*/Sessions/*/Participants/*/MessageInteractions/*', {
    async GET(c) {
      const { service, session, participant } = await participantOf(c)
      const id = uuidOf('KI', c.segs[7]!)
      const row = id ? await getInteraction(c.services.db, session.id, id) : null
      if (!row || row.kind !== 'message-interaction' || row.outbound_participant_id !== participant.id) throw notFound(c.path)
      return { status: 200, body: interactionJson(c.base, c.auth.accountSid, service.id, row, participant.id) }
    },
  }],
]
