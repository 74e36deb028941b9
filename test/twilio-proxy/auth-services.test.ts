// The façade's credentials and its first resources through the real `twilio` SDK: Basic auth with
// maskline-issued AC…/token (401 20003 otherwise, token rotation), Twilio error bodies everywhere
// under /proxy, Services CRUD (fetch by UniqueName, 80602), PhoneNumbers from maskline's pool
// (80101, 80104, 80611 on delete while in use), ShortCodes 404.
import t from 'tap'
import twilio from 'twilio'
import { facadeAccount, clientFor, poolNumber, restError, startFacade } from './support.js'

t.test('credentials: issued to the OWNER, checked on every request, rotated', async t => {
  const { api } = await startFacade(t)
  const a = await facadeAccount(api)
  t.match(a.accountSid, /^AC[0-9a-f]{32}$/)
  t.match(a.authToken, /^[0-9a-f]{32}$/)
  t.equal((await a.client.proxy.v1.services.list()).length, 0, 'the SDK authenticates with them')

  const view = await api.req('GET', '/v1/twilio-proxy/credentials', { token: a.ownerToken })
  t.same(view.body, { accountSid: a.accountSid, baseUrl: `${api.url}/proxy` }, 'the token is never shown again')

  const bad = clientFor(api, a.accountSid, '0'.repeat(32))
  const e = await restError(bad.proxy.v1.services.list())
  t.match(e, { status: 401, code: 20003, message: 'Authenticate', moreInfo: 'https://www.twilio.com/docs/errors/20003' })
  t.equal(e.constructor.name, 'RestException')
  const none = await fetch(`${api.url}/proxy/v1/Services`)
  t.equal(none.status, 401)
  t.same(await none.json(), { code: 20003, message: 'Authenticate', more_info: 'https://www.twilio.com/docs/errors/20003', status: 401 })

  // rotation: the same SID, a new token; the old one stops working at once on this node
  const r = await api.req('POST', '/v1/twilio-proxy/credentials', { token: a.ownerToken })
  api.secrets.add(r.body.authToken)
  t.equal(r.body.accountSid, a.accountSid)
  t.match(await restError(a.client.proxy.v1.services.list()), { status: 401, code: 20003 })
  t.equal((await clientFor(api, a.accountSid, r.body.authToken).proxy.v1.services.list()).length, 0)

  // API keys: SK…:secret with the accountSid given to the SDK; revoked at once
  const k = await api.req('POST', '/v1/twilio-proxy/api-keys', { token: a.ownerToken })
  api.secrets.add(k.body.secret)
  t.match(k, { status: 201, body: { sid: /^SK[0-9a-f]{32}$/, accountSid: a.accountSid } })
  const keyed = twilio(k.body.sid, k.body.secret, { accountSid: a.accountSid })
  keyed.proxy.baseUrl = `${api.url}/proxy`
  const made = await keyed.proxy.v1.services.create({ uniqueName: 'by key' })
  t.equal(made.accountSid, a.accountSid, 'an API key acts for its account')
  t.equal((await api.req('DELETE', `/v1/twilio-proxy/api-keys/${k.body.sid}`, { token: a.ownerToken })).status, 204)
  t.match(await restError(keyed.proxy.v1.services.list()), { status: 401, code: 20003 })
  const fresh = await api.signup()
  t.equal((await api.req('POST', '/v1/twilio-proxy/api-keys', { token: fresh.ownerToken })).status, 409, 'an account first')

  // the tenant's request limit (STARTER: 100 a minute), in Twilio's words
  let limited: unknown = null
  for (let i = 0; i < 101 && !limited; i++) limited = await clientFor(api, a.accountSid, r.body.authToken).proxy.v1.services.list().then(() => null, (err: unknown) => err)
  t.match(limited, { status: 429, code: 20429 })

  // only an OWNER's dashboard token issues them
  const acct = await api.signup()
  t.equal((await api.req('POST', '/v1/twilio-proxy/credentials', { token: acct.token })).status, 403, 'a tenant API token is refused')
})

t.test('services: CRUD, fetch by UniqueName, name conflicts, 404s in Twilio\'s shape', async t => {
  const { api } = await startFacade(t)
  const { client, accountSid } = await facadeAccount(api)
  const svc = await client.proxy.v1.services.create({ uniqueName: 'rides one', defaultTtl: 3600, geoMatchLevel: 'country', numberSelectionBehavior: 'avoid-sticky', callbackUrl: 'https://example.com/cb' })
  t.match(svc, { sid: /^KS[0-9a-f]{32}$/, accountSid, uniqueName: 'rides one', defaultTtl: 3600, geoMatchLevel: 'country', numberSelectionBehavior: 'avoid-sticky', callbackUrl: 'https://example.com/cb' })
  t.equal(svc.url, `${api.url}/proxy/v1/Services/${svc.sid}`)
  t.same(svc.links, { sessions: `${svc.url}/Sessions`, phone_numbers: `${svc.url}/PhoneNumbers` })
  t.ok(svc.dateCreated instanceof Date)
  t.equal((await client.proxy.v1.services(svc.sid).fetch()).uniqueName, 'rides one')
  t.equal((await client.proxy.v1.services('rides one').fetch()).sid, svc.sid, 'fetch by UniqueName (URL-decoded)')
  t.equal((await client.proxy.v1.services(svc.sid.toUpperCase().replace(/^KS/, 'KS')).fetch()).sid, svc.sid, 'SIDs in either case')
  const upd = await client.proxy.v1.services(svc.sid).update({ defaultTtl: 60, interceptCallbackUrl: 'https://example.com/i' })
  t.match(upd, { defaultTtl: 60, interceptCallbackUrl: 'https://example.com/i', uniqueName: 'rides one' })
  t.match(await restError(client.proxy.v1.services.create({ uniqueName: 'rides one' })), { status: 409, code: 80602 })
  t.match(await restError(client.proxy.v1.services.create({ uniqueName: 'x', geoMatchLevel: 'planet' as never })), { status: 400, code: 80701, message: "'GeoMatchLevel' is invalid." })
  t.match(await restError(client.proxy.v1.services.create({ uniqueName: 'y', defaultTtl: 'soon' as never })), { status: 400, code: 80701, message: "'DefaultTtl' is invalid." })
  t.equal((await client.proxy.v1.services.list()).length, 1)
  t.match(await restError(client.proxy.v1.services('KS' + '0'.repeat(32)).fetch()), { status: 404, code: 20404 })
  const sc = await fetch(`${svc.url}/ShortCodes`, { headers: { authorization: basic(accountSid, client.password!) } })
  t.equal(sc.status, 404)
  t.match(await sc.json(), { code: 20404, status: 404, more_info: String })
  const put = await fetch(svc.url, { method: 'PUT', headers: { authorization: basic(accountSid, client.password!) } })
  t.match(await put.json(), { code: 20004, status: 405 })
  const options = await fetch(svc.url, { method: 'OPTIONS' })
  t.match({ status: options.status, body: await options.json() }, { status: 405, body: { code: 20004, status: 405 } }, 'the gateway\'s own 405 in Twilio\'s shape')

  // another account sees nothing of it
  const other = await facadeAccount(api)
  t.match(await restError(other.client.proxy.v1.services(svc.sid).fetch()), { status: 404, code: 20404 })

  // without PUBLIC_BASE_URL, URLs follow the request's Host and X-Forwarded-Proto (behind a proxy)
  const behind = await fetch(svc.url, { headers: { authorization: basic(accountSid, client.password!), 'x-forwarded-proto': 'https', 'x-forwarded-host': 'proxy.maskline.example.com' } })
  t.equal((await behind.json() as { url: string }).url, `https://proxy.maskline.example.com/proxy/v1/Services/${svc.sid}`)

  t.equal(await client.proxy.v1.services(svc.sid).remove(), true)
  t.match(await restError(client.proxy.v1.services(svc.sid).fetch()), { status: 404, code: 20404 })
})

t.test('phone numbers: the Service\'s pool from maskline\'s numbers', async t => {
  const { api } = await startFacade(t)
  const { client } = await facadeAccount(api)
  const svc = await client.proxy.v1.services.create({ uniqueName: 'pool' })
  const pns = client.proxy.v1.services(svc.sid).phoneNumbers
  const n1 = await pns.create({ phoneNumber: poolNumber(1) })
  t.match(n1, { sid: /^PN[0-9a-f]{32}$/, phoneNumber: poolNumber(1), serviceSid: svc.sid, isReserved: false, inUse: 0, isoCountry: 'US', capabilities: { sms: true, voice: true } })
  const n2 = await pns.create({ sid: (await otherSid(api, poolNumber(2))) , isReserved: true })
  t.match(n2, { phoneNumber: poolNumber(2), isReserved: true }, 'added by its PN SID')
  t.match(await restError(pns.create({ phoneNumber: poolNumber(1) })), { status: 400, code: 80104 })
  t.match(await restError(pns.create({ phoneNumber: '+14155550100' })), { status: 400, code: 80601 })
  t.equal((await pns(n1.sid).fetch()).phoneNumber, poolNumber(1))
  t.equal((await pns(n2.sid).update({ isReserved: false })).isReserved, false)
  t.same((await pns.list()).map(p => p.phoneNumber), [poolNumber(1), poolNumber(2)])

  const svc2 = await client.proxy.v1.services.create({ uniqueName: 'pool 2' })
  t.match(await restError(client.proxy.v1.services(svc2.sid).phoneNumbers.create({ phoneNumber: poolNumber(1) })), { status: 400, code: 80101 })

  // in use: a participant holds it
  const s = await client.proxy.v1.services(svc.sid).sessions.create({ uniqueName: 'busy' })
  await client.proxy.v1.services(svc.sid).sessions(s.sid).participants.create({ identifier: '+14155550101', proxyIdentifier: poolNumber(1) })
  t.equal((await pns(n1.sid).fetch()).inUse, 1)
  t.match(await restError(pns(n1.sid).remove()), { status: 400, code: 80611 })
  t.equal(await pns(n2.sid).remove(), true)
  t.match(await restError(pns(n2.sid).fetch()), { status: 404, code: 20404 })
})

t.test('transport: form bodies as any Twilio client sends them', async t => {
  const { api } = await startFacade(t)
  const { client, accountSid } = await facadeAccount(api)
  const auth = basic(accountSid, client.password!)
  const post = async (path: string, body: string) => {
    const r = await fetch(`${api.url}/proxy/v1${path}`, { method: 'POST', headers: { authorization: auth, 'content-type': 'application/x-www-form-urlencoded' }, body })
    return { status: r.status, body: await r.json() as Record<string, any> }
  }
  const svc = await post('/Services', 'UniqueName=raw+one&FailOnParticipantConflict=true&SomethingNew=1')
  t.equal(svc.status, 201, 'unknown parameters are ignored')
  const pn = await post(`/Services/${svc.body.sid}/PhoneNumbers`, `PhoneNumber=${encodeURIComponent(poolNumber(3))}&IsReserved=TRUE`)
  t.match(pn, { status: 201, body: { is_reserved: true } }, 'booleans in any case')
  t.match(await post(`/Services/${svc.body.sid}/PhoneNumbers`, `PhoneNumber=${encodeURIComponent(poolNumber(4))}&IsReserved=yes`), { status: 400, body: { code: 80701, message: "'IsReserved' is invalid." } })
  const s = await post(`/Services/${svc.body.sid}/Sessions`, `DateExpiry=${encodeURIComponent('2031-01-01T10:00:00+02:00')}&Participants=${encodeURIComponent('{"identifier":"+14155550141","proxyidentifier":"' + poolNumber(3) + '"}')}&Participants=${encodeURIComponent('{"IDENTIFIER":"+14155550142","ProxyIdentifier":"' + poolNumber(3) + '"}')}`)
  t.match(s, { status: 201, body: { date_expiry: '2031-01-01T08:00:00Z' } }, 'a date with an offset; repeated Participants, keys in any case')
  const parts = await fetch(`${api.url}/proxy/v1/Services/${svc.body.sid}/Sessions/${s.body.sid}/Participants`, { headers: { authorization: auth } }).then(r => r.json()) as { participants: Array<{ proxy_identifier: string }> }
  t.same(parts.participants.map(p => p.proxy_identifier), [poolNumber(3), poolNumber(3)], 'a reserved number, asked for')
  t.match(await post(`/Services/${svc.body.sid}/Sessions`, `Participants=${encodeURIComponent('{"Identifier":"+14155550143"}')}`), { status: 400, body: { code: 80207 } }, 'and never given unasked')
  const noOffset = await post(`/Services/${svc.body.sid}/Sessions`, `DateExpiry=2031-01-01T10:00:00`)
  t.match(noOffset, { status: 201, body: { date_expiry: '2031-01-01T10:00:00Z' } }, 'no offset: UTC')
  const big = await fetch(`${api.url}/proxy/v1/Services`, { method: 'POST', headers: { authorization: auth, 'content-type': 'application/x-www-form-urlencoded' }, body: `UniqueName=${'x'.repeat(70_000)}` })
  t.match({ status: big.status, body: await big.json() }, { status: 413, body: { code: 20413, status: 413, more_info: String } }, 'even the gateway\'s own refusals')
  t.match(await post(`/Services/${svc.body.sid}/Sessions`, 'DateExpiry=tomorrow'), { status: 400, body: { code: 80701, message: "'DateExpiry' is invalid." } })
})

function basic(user: string, pass: string): string {
  return `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}`
}

/** The PN SID the façade gives a pool number (what a fetch shows), found through a scratch Service. */
async function otherSid(api: Awaited<ReturnType<typeof startFacade>>['api'], number: string): Promise<string> {
  const { client } = await facadeAccount(api)
  const s = await client.proxy.v1.services.create({ uniqueName: 'scratch' })
  const pn = await client.proxy.v1.services(s.sid).phoneNumbers.create({ phoneNumber: number })
  await client.proxy.v1.services(s.sid).phoneNumbers(pn.sid).remove()
  return pn.sid
}
