// A façade session carries real traffic (docs/twilio-proxy.md): with its second participant, a
// native session pinned on both participants' proxy numbers routes voice and SMS provider
// callbacks both ways (A dials its proxy pA and B is called from B's proxy pB; B's texts reach A
// from pA), the interactions appear in the session's Interactions, and closing the session stops
// the routing. Driven by the real `twilio` SDK and the provider's signed callbacks.
import t from 'tap'
import { sql } from 'slonik'
import { eventually, startTelnyxService } from '../support/service.js'
import { uuidOf } from '../../api/twilio-proxy/sid.js'
import { facadeAccount, poolNumber } from './support.js'

const A = '+14155550131', B = '+14155550132'
/** TeXML that dials a party. */
const DIALS = /<Number[ >]/

t.test('a façade session routes calls and texts through each participant\'s own proxy', async t => {
  let offset = 0
  const api = await startTelnyxService(t, { now: () => Date.now() + offset })
  const { driver, fake } = api
  for (const p of [A, B]) api.partyNumbers.add(p)
  const { client } = await facadeAccount(api)
  const svc = await client.proxy.v1.services.create({ uniqueName: 'routing' })
  const service = client.proxy.v1.services(svc.sid)
  const n1 = poolNumber(40), n2 = poolNumber(41)
  for (const n of [n1, n2]) await service.phoneNumbers.create({ phoneNumber: n })

  // A is active on n1 elsewhere and B on n2: in the session below they cannot share a number
  const x = await service.sessions.create({ participants: [{ Identifier: A, ProxyIdentifier: n1 }] })
  const y = await service.sessions.create({ participants: [{ Identifier: B, ProxyIdentifier: n2 }] })
  const s = await service.sessions.create({ uniqueName: 'ride', participants: [{ Identifier: A }, { Identifier: B }] })
  const [pa, pb] = await service.sessions(s.sid).participants.list()
  const pA = pa!.proxyIdentifier, pB = pb!.proxyIdentifier
  t.same([pA, pB], [n2, n1], 'each participant its own proxy')

  const toB = await (await driver.voice({ from: A, to: pA, callSid: 'CA-f1' })).text()
  t.match(toB, new RegExp(`callerId="\\${pB}"`), 'B sees the call from its own proxy')
  t.match(toB, new RegExp(`>\\${B}</Number>`))
  const toA = await (await driver.voice({ from: B, to: pB, callSid: 'CA-f2' })).text()
  t.match(toA, new RegExp(`callerId="\\${pA}"`))
  t.match(toA, new RegExp(`>\\${A}</Number>`))

  const before = fake.count
  t.same(await (await driver.smsReceived({ from: B, to: pB, text: 'at the door', messageId: 'fs-1' })).json(), { ok: true })
  t.equal(fake.count, before + 1)
  const sent = fake.requests.filter(q => q.path === '/v2/messages').at(-1)!.body as Record<string, string>
  t.match(sent, { from: pA, to: A })

  // the session's Interactions: the two calls and the text, each with its legs' participants
  await api.svc.flushRecords()
  const list = await service.sessions(s.sid).interactions.list()
  t.same(list.map(i => i.type), ['voice', 'voice', 'message'])
  t.match(list[0], { inboundParticipantSid: pa!.sid, outboundParticipantSid: pb!.sid, inboundResourceSid: /^CA[0-9a-f]{32}$/, outboundResourceSid: /^CA[0-9a-f]{32}$/, inboundResourceType: 'Call', data: '{"duration":"0"}' })
  t.match(list[1], { inboundParticipantSid: pb!.sid, outboundParticipantSid: pa!.sid })
  t.match(list[2], { inboundParticipantSid: pb!.sid, outboundParticipantSid: pa!.sid, inboundResourceSid: /^SM[0-9a-f]{32}$/, inboundResourceStatus: 'received', data: '{}' })
  const live = await service.sessions(s.sid).fetch()
  t.equal(live.status, 'in-progress', 'traffic moves the session on')
  t.ok(live.dateLastInteraction instanceof Date)
  t.equal(await service.sessions(s.sid).interactions(list[0]!.sid).remove(), true)
  t.equal((await service.sessions(s.sid).interactions.list()).length, 2, 'a deleted interaction is hidden')

  await service.sessions(s.sid).update({ status: 'closed' })
  const after = await (await driver.voice({ from: A, to: pA, callSid: 'CA-f3' })).text()
  t.notMatch(after, DIALS, 'a closed session routes nothing')
  for (const k of [x, y, s]) await service.sessions(k.sid).remove()

  // Ttl: the sweep closes the session and ends its routing, with no request to the façade
  const ttl = await service.sessions.create({ ttl: 60, participants: [{ Identifier: A }, { Identifier: B }] })
  const [ta] = await service.sessions(ttl.sid).participants.list()
  t.match(await (await driver.voice({ from: A, to: ta!.proxyIdentifier, callSid: 'CA-f4' })).text(), DIALS, 'routed while it lasts')
  offset += 61_000
  // no request to the façade: the sweep alone (watched in the database) closes it
  const id = uuidOf('KC', ttl.sid)!
  const closed = await eventually(async () => ((await api.svc.db.pool.oneFirst(sql.unsafe`SELECT status FROM twilio_sessions WHERE id = ${id}`)) === 'closed' ? true : undefined), 'the sweep', 5_000)
  t.ok(closed)
  // the native session ends right behind the close (a probe after the close is no interaction)
  let probes = 0
  const stopped = await eventually(async () => (DIALS.test(await (await driver.voice({ from: A, to: ta!.proxyIdentifier, callSid: `CA-f5-${++probes}` })).text()) ? undefined : true), 'the routing to stop', 2_000)
  t.ok(stopped, 'not routed once the Ttl has passed')
  t.match(await service.sessions(ttl.sid).fetch(), { status: 'closed', closedReason: 'ttl' })
})
