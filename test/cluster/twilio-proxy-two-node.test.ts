// The Twilio Proxy façade on two nodes (docs/twilio-proxy.md): a Service, its numbers and a session
// with two participants created through node 1 with the real `twilio` SDK route on node 2 (which
// learns the pinned native session from the bus), both ways, each party reached from the other's
// proxy number; closing the session through node 2 stops the routing on node 1. Embedded mode is
// single-node by design: skipped there with the reason.
import t from 'tap'
import twilio from 'twilio'
import { childData, request, type ChildService } from '../support/child-service.js'
import { CallbackDriver } from '../support/callback-driver.js'
import { privateRedis, sleep, startNode } from './lib.js'

const embedded = process.env.MASKLINE_TEST_BACKEND === 'embedded' || !process.env.TEST_DATABASE_URL
const A = '+14155550161', B = '+14155550162'

t.test('a façade session created on one node routes on the other', { skip: embedded && 'embedded mode is single-node by design' }, async t => {
  const redis = await privateRedis(t)
  const data = await childData(t)
  const [n1, n2] = await Promise.all([startNode(t, data, redis.url), startNode(t, data, redis.url)]) as [ChildService, ChildService]
  const email = `facade-2n-${process.pid}@example.test`, password = 'correct horse battery staple'
  await request(n1.url, 'POST', '/v1/auth/signup', { body: { companyName: `Facade two nodes ${process.pid}`, email, password } })
  const owner = (await request(n1.url, 'POST', '/v1/auth/dashboard/login', { body: { email, password } })).body.accessToken as string
  const cred = await request(n1.url, 'POST', '/v1/twilio-proxy/credentials', { token: owner })
  t.equal(cred.status, 201)
  const client = (node: ChildService) => {
    const c = twilio(cred.body.accountSid, cred.body.authToken)
    c.proxy.baseUrl = `${node.url}/proxy`
    return c
  }
  const on1 = client(n1).proxy.v1, on2 = client(n2).proxy.v1
  const svc = await on1.services.create({ uniqueName: 'two-nodes' })
  // Two numbers, A already active on the first elsewhere and B on the second: no number serves
  // both, so each participant gets its own.
  for (const n of ['+12025550600', '+12025550601']) await on1.services(svc.sid).phoneNumbers.create({ phoneNumber: n })
  await on1.services(svc.sid).sessions.create({ participants: [{ Identifier: A, ProxyIdentifier: '+12025550600' }] })
  await on1.services(svc.sid).sessions.create({ participants: [{ Identifier: B, ProxyIdentifier: '+12025550601' }] })
  const s = await on1.services(svc.sid).sessions.create({ participants: [{ Identifier: A }, { Identifier: B }] })
  const parts = await on2.services(svc.sid).sessions(s.sid).participants.list()
  const pA = parts.find(p => p.identifier === A)!.proxyIdentifier, pB = parts.find(p => p.identifier === B)!.proxyIdentifier
  t.not(pA, pB, 'each participant its own proxy number')

  const driver = new CallbackDriver({ baseUrl: n2.url, mode: 'none' })
  let toB = ''
  for (let i = 0; i < 100 && !toB.includes('<Number'); i++, await sleep(50)) toB = await (await driver.voice({ from: A, to: pA, callSid: `facade-2n-a-${i}` })).text()
  t.match(toB, `callerId="${pB}"`, 'on node 2, A\'s call to its proxy reaches B from B\'s proxy')
  t.match(toB, `>${B}</Number>`)
  const toA = await (await driver.voice({ from: B, to: pB, callSid: 'facade-2n-b' })).text()
  t.match(toA, `callerId="${pA}"`, 'and B\'s call to its proxy reaches A from A\'s proxy')
  t.match(toA, `>${A}</Number>`)

  const closed = await on2.services(svc.sid).sessions(s.sid).update({ status: 'closed' })
  t.equal(closed.status, 'closed')
  const driver1 = new CallbackDriver({ baseUrl: n1.url, mode: 'none' })
  let after = '<Number'
  for (let i = 0; i < 100 && after.includes('<Number'); i++, await sleep(50)) after = await (await driver1.voice({ from: A, to: pA, callSid: `facade-2n-c-${i}` })).text()
  t.notMatch(after, '<Number', 'closed through node 2: node 1 no longer routes it')
})
