// Participants (KP, docs/twilio-proxy.md): create, list, fetch, soft delete (200 with date_deleted).
import { listParticipants, sessionParticipants, softDeleteParticipant, type ParticipantRow } from '../../sql/twilio-proxy-sessions.js'
import type { Ctx } from './context.js'
import { notFound } from './errors.js'
import { endNative, isOpen } from './lifecycle.js'
import { listBody, pageRequest } from './paging.js'
import { addParticipant, identifierOf } from './participants.js'
import { participantJson } from './serialize.js'
import { sessionOf } from './session-routes.js'
import { uuidOf } from './sid.js'
import type { Table } from './router.js'
import { patchSession } from '../../sql/twilio-proxy-sessions.js'

const json = (c: Ctx, p: ParticipantRow) => participantJson(c.base, c.auth.accountSid, p, identifierOf(c, p))

/** The participant of segs[5] in the session, or 404. */
export async function participantOf(c: Ctx) {
  const found = await sessionOf(c)
  const id = uuidOf('KP', c.segs[5]!)
  const participant = id ? (await sessionParticipants(c.services.db, found.session.id)).find(p => p.id === id) : undefined
  if (!participant) throw notFound(c.path)
  return { ...found, participant }
}

export const participantRoutes: Table = [
  ['Services/*/Sessions/*/Participants', {
    async POST(c) {
      const { service, session } = await sessionOf(c)
      const p = c.params
      const row = await addParticipant(c, service, session, {
        identifier: p.str('Identifier', 191), friendlyName: p.str('FriendlyName', 255),
        proxyIdentifier: p.str('ProxyIdentifier', 255), proxyIdentifierSid: p.str('ProxyIdentifierSid', 34),
      })
      return { status: 201, body: json(c, row) }
    },
    async GET(c) {
      const { session } = await sessionOf(c)
      const req = pageRequest(c.params)
      const page = await listParticipants(c.services.db, session.id, req)
      const path = `/Services/${c.segs[1]}/Sessions/${c.segs[3]}/Participants`
      return { status: 200, body: listBody('participants', c.base, path, { ...req, tokenText: c.params.str('PageToken') }, page, page.rows.map(r => json(c, r))) }
    },
  }],
  ['Services/*/Sessions/*/Participants/*', {
    async GET(c) {
      return { status: 200, body: json(c, (await participantOf(c)).participant) }
    },
    async DELETE(c) {
      const { session, participant } = await participantOf(c)
      const row = await softDeleteParticipant(c.services.db, participant.id, c.now) ?? participant
      // A session without its pair routes nothing: the native session behind it ends.
      if (session.native_session_id && isOpen(session)) {
        await endNative(c, session.native_session_id)
        await patchSession(c.services.db, session.id, { native_session_id: null }, c.now)
      }
      return { status: 200, body: json(c, row) }
    },
  }],
]
