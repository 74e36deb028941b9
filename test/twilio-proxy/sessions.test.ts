// Sessions and Participants through the real `twilio` SDK: create with Participants (both
// shapes), paging over more than 100 sessions (list and each), fetch by UniqueName (80308),
// the lifecycle (close, 80607, re-open, 80604, 80608, TTL and DateExpiry expiry on the service's
// clock), participant rules (80404, 80103, 80609, soft delete, 80612, 80605) and the proxy number
// each participant gets (different ones when one cannot serve both).
import t from 'tap'
import { facadeAccount, poolNumber, restError, startFacade } from './support.js'

const A = '+14155550111', B = '+14155550112', C = '+14155550113', D = '+14155550114'

t.test('sessions', async t => {
  const { api, advance } = await startFacade(t)
  const { client } = await facadeAccount(api, { tier: 'ENTERPRISE' }) // 100 requests a minute are not enough here
  const svc = await client.proxy.v1.services.create({ uniqueName: 'sessions' })
  const service = client.proxy.v1.services(svc.sid)
  for (const i of [1, 2]) await service.phoneNumbers.create({ phoneNumber: poolNumber(i) })

  t.test('create with participants, in both shapes; fetch by SID and by UniqueName', async t => {
    const s = await service.sessions.create({ uniqueName: 'order 1', ttl: 3600, mode: 'voice-and-message', participants: [{ Identifier: A }, { identifier: B, friendlyName: 'B' }] })
    t.match(s, { sid: /^KC[0-9a-f]{32}$/, serviceSid: svc.sid, status: 'open', ttl: 3600, mode: 'voice-and-message', uniqueName: 'order 1', closedReason: null, dateEnded: null })
    t.ok(s.dateStarted instanceof Date, 'date_started is the create')
    t.same(s.links, { interactions: `${s.url}/Interactions`, participants: `${s.url}/Participants` })
    const parts = await service.sessions(s.sid).participants.list()
    t.same(parts.map(p => p.identifier), [A, B])
    t.same(parts.map(p => p.proxyIdentifier), [poolNumber(1), poolNumber(1)], 'one number serves both when it can')
    t.match(parts[1], { friendlyName: 'B', proxyIdentifierSid: /^PN[0-9a-f]{32}$/, dateDeleted: null })
    t.equal((await service.sessions('order 1').fetch()).sid, s.sid)
    t.match(await restError(service.sessions('no such name').fetch()), { status: 404, code: 80308 })
    t.match(await restError(service.sessions.create({ uniqueName: 'order 1' })), { status: 409, code: 80603 })
    // one JSON array in one field (what a stringified array sends)
    const s2 = await service.sessions.create({ participants: JSON.stringify([{ Identifier: C }, { Identifier: D }]) as never })
    t.equal((await service.sessions(s2.sid).participants.list()).length, 2)
    t.match(await restError(service.sessions.create({ mode: 'fax-only' as never })), { status: 400, code: 80701, message: "'Mode' is invalid." })
    t.match(await restError(service.sessions.create({ participants: [{ Identifier: '+15551' }] })), { status: 400, code: 80404 })
    t.match(await restError(service.sessions.create({ uniqueName: 'three', participants: [{ Identifier: '+14155550181' }, { Identifier: '+14155550182' }, { Identifier: '+14155550183' }] })), { code: 80609 })
    t.match(await restError(service.sessions('three').fetch()), { code: 80308 }, 'a refused create leaves nothing')
    await service.sessions(s.sid).remove()
    await service.sessions(s2.sid).remove()
  })

  t.test('participants: limits, duplicates, soft delete', async t => {
    const s = await service.sessions.create({})
    const ps = service.sessions(s.sid).participants
    const a = await ps.create({ identifier: A, friendlyName: 'agent' })
    t.match(a, { sid: /^KP[0-9a-f]{32}$/, sessionSid: s.sid, identifier: A, proxyIdentifier: /^\+1202555010[12]$/ })
    t.equal(a.links.message_interactions, `${a.url}/MessageInteractions`)
    t.match(await restError(ps.create({ identifier: A })), { status: 400, code: 80103 })
    t.match(await restError(ps.create({ identifier: '4155550000' })), { status: 400, code: 80404 })
    t.match(await restError(ps.create({ identifier: B, proxyIdentifier: '+12025550199' })), { status: 400, code: 80605 })
    await ps.create({ identifier: B })
    t.match(await restError(ps.create({ identifier: C })), { status: 400, code: 80609 })
    const gone = await ps(a.sid).remove()
    t.equal(gone, true)
    const fetched = await ps(a.sid).fetch()
    t.ok(fetched.dateDeleted instanceof Date, 'a deleted participant keeps date_deleted')
    t.match(await restError(ps.create({ identifier: A })), { status: 400, code: 80612 })
    t.equal((await ps.create({ identifier: C })).identifier, C, 'a deleted participant no longer counts toward 2')
    t.equal((await ps.list()).length, 3)
    await service.sessions(s.sid).remove()
  })

  t.test('per-participant numbers: different proxies when one number cannot serve both', async t => {
    // A is active on number 1 elsewhere, D on number 2 elsewhere
    const x = await service.sessions.create({ participants: [{ Identifier: A, ProxyIdentifier: poolNumber(1) }] })
    const y = await service.sessions.create({ participants: [{ Identifier: D, ProxyIdentifier: poolNumber(2) }] })
    const s = await service.sessions.create({ participants: [{ Identifier: A }, { Identifier: D }] })
    const [pa, pd] = await service.sessions(s.sid).participants.list()
    t.equal(pa!.proxyIdentifier, poolNumber(2), 'A gets the number it is free on')
    t.equal(pd!.proxyIdentifier, poolNumber(1), 'D cannot share it, so it gets the other')
    // no number left for A: both hold A
    const z = await service.sessions.create({})
    t.match(await restError(service.sessions(z.sid).participants.create({ identifier: A })), { status: 400, code: 80208 })
    t.match(await restError(service.sessions(z.sid).participants.create({ identifier: A, proxyIdentifier: poolNumber(1) })), { status: 400, code: 80604 })
    for (const k of [x, y, s, z]) await service.sessions(k.sid).remove()
  })

  t.test('concurrent creates of one identifier never share a proxy number (the pair index)', async t => {
    const one = await client.proxy.v1.services.create({ uniqueName: 'one number' })
    const svc1 = client.proxy.v1.services(one.sid)
    await svc1.phoneNumbers.create({ phoneNumber: poolNumber(9) })
    for (let round = 0; round < 3; round++) {
      const x = await svc1.sessions.create({})
      const y = await svc1.sessions.create({})
      const X = `+1415555016${round}`
      const out = await Promise.allSettled([x, y].map(s => svc1.sessions(s.sid).participants.create({ identifier: X })))
      t.equal(out.filter(o => o.status === 'fulfilled').length, 1, `round ${round}: one create wins`)
      const lost = out.find(o => o.status === 'rejected') as PromiseRejectedResult
      t.match(lost.reason, { code: /^(80208|80623)$/ }, 'the other is refused, never a shared pair')
      for (const s of [x, y]) await svc1.sessions(s.sid).remove()
    }
  })

  t.test('concurrent session creates with Participants: the pair index decides, the loser leaves nothing', async t => {
    const one = await client.proxy.v1.services.create({ uniqueName: 'one number, creates' })
    const svc1 = client.proxy.v1.services(one.sid)
    await svc1.phoneNumbers.create({ phoneNumber: poolNumber(8) })
    for (let round = 0; round < 3; round++) {
      const X = `+1415555017${round}`
      const out = await Promise.allSettled(['a', 'b'].map(k => svc1.sessions.create({ uniqueName: `race ${round} ${k}`, participants: [{ Identifier: X }] })))
      const won = out.filter(o => o.status === 'fulfilled')
      t.equal(won.length, 1, `round ${round}: one create wins`)
      const lost = out.find(o => o.status === 'rejected') as PromiseRejectedResult
      t.match(lost.reason, { code: /^(80208|80623)$/ }, 'the other is refused, never a shared pair')
      t.equal((await svc1.sessions.list()).length, 1, 'the refused create left no session')
      await svc1.sessions((won[0] as PromiseFulfilledResult<{ sid: string }>).value.sid).remove()
    }
    // A refused participant answers after a taken UniqueName, as when the session is written first.
    const taken = await service.sessions.create({ uniqueName: 'taken' })
    t.match(await restError(service.sessions.create({ uniqueName: 'taken', participants: [{ Identifier: '+15551' }] })), { status: 409, code: 80603 })
    t.match(await restError(service.sessions.create({ uniqueName: 'twice', participants: [{ Identifier: A }, { Identifier: A }] })), { status: 400, code: 80103 })
    t.match(await restError(service.sessions('twice').fetch()), { code: 80308 }, 'nothing of it is left')
    await service.sessions(taken.sid).remove()
  })

  t.test('lifecycle: close, updates of a closed session, re-open, 80604, 80608', async t => {
    const s = await service.sessions.create({ uniqueName: 'life', participants: [{ Identifier: A, ProxyIdentifier: poolNumber(1) }] })
    t.match(await restError(service.sessions(s.sid).update({ status: 'failed' })), { status: 400, code: 80608 })
    const closed = await service.sessions(s.sid).update({ status: 'closed' })
    t.match(closed, { status: 'closed', closedReason: 'api' })
    t.ok(closed.dateEnded instanceof Date)
    t.match(await restError(service.sessions(s.sid).update({ ttl: 60 })), { status: 400, code: 80607 })
    t.match(await restError(service.sessions(s.sid).update({ status: 'closed' })), { status: 400, code: 80607 })
    // A takes number 1 in another session: the re-open is refused
    const other = await service.sessions.create({ participants: [{ Identifier: A, ProxyIdentifier: poolNumber(1) }] })
    t.match(await restError(service.sessions(s.sid).update({ status: 'in-progress' })), { status: 400, code: 80604 })
    await service.sessions(other.sid).update({ status: 'closed' })
    const reopened = await service.sessions(s.sid).update({ status: 'in-progress' })
    t.match(reopened, { status: 'in-progress', closedReason: null, dateEnded: null })
    t.match(await restError(service.sessions(other.sid).update({ status: 'in-progress' })), { status: 400, code: 80604 }, 'and now the other one cannot')
    for (const k of [s, other]) await service.sessions(k.sid).remove()
    t.match(await restError(service.sessions(s.sid).fetch()), { status: 404, code: 20404 })
  })

  t.test('expiry: Ttl from the last interaction, DateExpiry over Ttl (the service clock)', async t => {
    const s = await service.sessions.create({ ttl: 60 })
    t.equal(Math.round((s.dateExpiry?.getTime() ?? 0)), 0, 'date_expiry is only what was set')
    const e = await service.sessions.create({ ttl: 3600, dateExpiry: new Date(Date.now() + 120_000) })
    advance(61_000)
    t.match(await service.sessions(s.sid).fetch(), { status: 'closed', closedReason: 'ttl' })
    t.match(await service.sessions(e.sid).fetch(), { status: 'open' })
    advance(60_000)
    t.match(await service.sessions(e.sid).fetch(), { status: 'closed', closedReason: 'date_expiry' })
    const re = await service.sessions(s.sid).update({ status: 'in-progress' })
    t.match(re, { status: 'in-progress', ttl: 60 }, 're-opened: the Ttl counts from now')
    advance(30_000)
    t.match(await service.sessions(s.sid).fetch(), { status: 'in-progress' })
    for (const k of [s, e]) await service.sessions(k.sid).remove()
  })

  t.test('paging: more than 100 sessions with list() and each(), in creation order', async t => {
    const other = await client.proxy.v1.services.create({ uniqueName: 'paging' })
    const sessions = client.proxy.v1.services(other.sid).sessions
    const made: string[] = []
    for (let i = 0; i < 105; i++) made.push((await sessions.create({ uniqueName: `p${i}` })).sid)
    t.same((await sessions.list()).map(s => s.sid), made, 'list() follows next_page_url')
    const seen: string[] = []
    await new Promise<void>((resolve, reject) => { sessions.each({ pageSize: 40, done: (err?: Error) => (err ? reject(err) : resolve()) }, s => { seen.push(s.sid) }) })
    t.same(seen, made, 'each() walks every page')
    const page = await sessions.page({ pageSize: 500 })
    t.equal(page.instances.length, 100, 'PageSize is clamped to 100')
    const second = await page.nextPage()
    t.equal(second!.instances.length, 5)
    const back = await second!.previousPage()
    t.same(back!.instances.map(s => s.sid), made.slice(0, 100), 'previous_page_url leads back')
    const r = await fetch(`${api.url}/proxy/v1/Services/${other.sid}/Sessions?PageSize=2`, { headers: { authorization: `Basic ${Buffer.from(`${client.username}:${client.password}`).toString('base64')}` } })
    const body = await r.json() as { meta: Record<string, unknown> }
    t.match(body.meta, { page: 0, page_size: 2, key: 'sessions', previous_page_url: null, first_page_url: `${api.url}/proxy/v1/Services/${other.sid}/Sessions?PageSize=2&Page=0`, next_page_url: /Page=1&PageToken=PA/ })
  })
})
