// MessageInteractions and Interactions through the real `twilio` SDK: a message sent to a
// participant from its proxy number (the provider's outbound path), recorded without its text,
// listed under the participant (meta key `interactions`) and under the session; the first
// interaction moves the session to in-progress.
import t from 'tap'
import { facadeAccount, poolNumber, restError, startFacade } from './support.js'

const A = '+14155550121', B = '+14155550122'

t.test('message interactions and interactions', async t => {
  const { api } = await startFacade(t)
  const { client, accountSid } = await facadeAccount(api)
  const svc = await client.proxy.v1.services.create({ uniqueName: 'messages' })
  const service = client.proxy.v1.services(svc.sid)
  await service.phoneNumbers.create({ phoneNumber: poolNumber(5) })
  const s = await service.sessions.create({ participants: [{ Identifier: A }, { Identifier: B }] })
  const [pa] = await service.sessions(s.sid).participants.list()
  const mi = service.sessions(s.sid).participants(pa!.sid).messageInteractions

  const sent = await mi.create({ body: 'Your driver is here' })
  t.match(sent, {
    sid: /^KI[0-9a-f]{32}$/, sessionSid: s.sid, serviceSid: svc.sid, accountSid, participantSid: pa!.sid, type: 'message', data: '{}',
    inboundParticipantSid: null, inboundResourceSid: null, outboundParticipantSid: pa!.sid, outboundResourceSid: /^SM[0-9a-f]{32}$/,
    outboundResourceStatus: 'sent', outboundResourceType: 'Message',
  })
  t.notMatch(JSON.stringify(sent.toJSON()), /driver/, 'the text is not kept')
  t.equal(sent.url, `${pa!.url}/MessageInteractions/${sent.sid}`)
  t.equal((await mi(sent.sid).fetch()).sid, sent.sid)
  t.same((await mi.list()).map(i => i.sid), [sent.sid])

  const after = await service.sessions(s.sid).fetch()
  t.equal(after.status, 'in-progress', 'the first interaction moves the session on')
  t.ok(after.dateLastInteraction instanceof Date)

  const all = service.sessions(s.sid).interactions
  const listed = await all.list()
  t.same(listed.map(i => i.sid), [sent.sid])
  t.equal((await all(sent.sid).fetch()).url, `${s.url}/Interactions/${sent.sid}`)
  t.match(await restError(mi.create({ body: '' })), { status: 400, code: 80701, message: "'Body' is invalid." })
  t.equal(await all(sent.sid).remove(), true)
  t.equal((await all.list()).length, 0)
  t.match(await restError(all(sent.sid).fetch()), { status: 404, code: 20404 })

  await service.sessions(s.sid).update({ status: 'closed' })
  t.match(await restError(mi.create({ body: 'late' })), { status: 400, code: 80607 })
})
