// PhoneNumbers (PN, docs/twilio-proxy.md): the Service's pool, taken from maskline's own pool
// (NUMBER_POOL). Added by PhoneNumber (E.164) or by Sid (the stable PN SID the façade gives each
// pool number); a number is in one Service at most (80101), once (80104); removing one that
// active participants hold is refused (80611), mark it reserved and let it drain instead.
import { addPhoneNumber, getPhoneNumber, listPhoneNumbers, poolNumbers, removePhoneNumber, servicePhoneNumbers, setReserved } from '../../sql/twilio-proxy.js'
import type { Ctx } from './context.js'
import { invalidParam, notFound, rule } from './errors.js'
import { listBody, pageRequest } from './paging.js'
import { numberSid, phoneNumberJson } from './serialize.js'
import { serviceOf } from './service-routes.js'
import { normalSid } from './sid.js'
import type { Table } from './router.js'

async function numberOf(c: Ctx, serviceId: string): Promise<string> {
  const sid = normalSid(c.segs[3]!)
  const hit = (await servicePhoneNumbers(c.services.db, serviceId)).find(p => numberSid(p.number) === sid || p.number === sid)
  if (!hit) throw notFound(c.path)
  return hit.number
}

export const numberRoutes: Table = [
  ['Services/*/PhoneNumbers', {
    async POST(c) {
      const service = await serviceOf(c, c.segs[1]!)
      const byNumber = c.params.str('PhoneNumber', 32)
      const bySid = c.params.str('Sid', 34)
      const reserved = c.params.bool('IsReserved') ?? false
      if (!byNumber && !bySid) throw invalidParam('PhoneNumber')
      const pool = await poolNumbers(c.services.db)
      const number = byNumber
        ? pool.find(p => p.number === byNumber.trim())?.number
        : pool.find(p => numberSid(p.number) === normalSid(bySid!))?.number
      if (!number) throw byNumber ? rule(80601, 'Phone number is not in maskline\'s number pool') : rule(80301, 'Phone number SID not found', 404)
      const row = await addPhoneNumber(c.services.db, c.auth.tenantId, service.id, number, reserved, c.now)
      if (row === 'taken') throw rule(80101, 'Number already added to another Service')
      if (row === 'duplicate') throw rule(80104, 'Phone number is already in the Service')
      // Bound to the tenant: native allocation no longer hands it out (refused while another tenant's sessions hold it).
      if (await c.deps.native.bind(c.auth.tenantId, number) === 'taken') {
        await removePhoneNumber(c.services.db, service.id, number)
        throw rule(80601, 'Phone number is not available: another account\'s sessions are on it')
      }
      return { status: 201, body: phoneNumberJson(c.base, c.auth.accountSid, row) }
    },
    async GET(c) {
      const service = await serviceOf(c, c.segs[1]!)
      const req = pageRequest(c.params)
      const page = await listPhoneNumbers(c.services.db, service.id, req)
      return { status: 200, body: listBody('phone_numbers', c.base, `/Services/${c.segs[1]}/PhoneNumbers`, { ...req, tokenText: c.params.str('PageToken') }, page, page.rows.map(r => phoneNumberJson(c.base, c.auth.accountSid, r))) }
    },
  }],
  ['Services/*/PhoneNumbers/*', {
    async GET(c) {
      const service = await serviceOf(c, c.segs[1]!)
      const row = await getPhoneNumber(c.services.db, service.id, await numberOf(c, service.id))
      return { status: 200, body: phoneNumberJson(c.base, c.auth.accountSid, row!) }
    },
    async POST(c) {
      const service = await serviceOf(c, c.segs[1]!)
      const number = await numberOf(c, service.id)
      const reserved = c.params.bool('IsReserved')
      if (reserved !== undefined) await setReserved(c.services.db, service.id, number, reserved, c.now)
      return { status: 200, body: phoneNumberJson(c.base, c.auth.accountSid, (await getPhoneNumber(c.services.db, service.id, number))!) }
    },
    async DELETE(c) {
      const service = await serviceOf(c, c.segs[1]!)
      const number = await numberOf(c, service.id)
      const r = await removePhoneNumber(c.services.db, service.id, number)
      if (r === 'in-use') throw rule(80611, 'The proxy number is in active sessions')
      await c.deps.native.unbind(c.auth.tenantId, number)
      return { status: 204 }
    },
  }],
]
