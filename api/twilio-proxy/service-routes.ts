// Services (KS, docs/twilio-proxy.md): create, list, fetch (by SID or UniqueName), update, delete.
// ShortCodes, removed from Twilio's API in 2025, are not routed: 404 (docs/twilio-proxy.md).
import { uuidv7 } from '../../sql/vocabulary/ids.js'
import { deleteService, getService, insertService, listServices, servicePhoneNumbers, updateService, type ServiceFields, type ServiceRow } from '../../sql/twilio-proxy.js'
import type { Ctx } from './context.js'
import { invalidParam, notFound, rule } from './errors.js'
import { listBody, pageRequest } from './paging.js'
import type { Params } from './params.js'
import { serviceJson } from './serialize.js'
import { uuidOf } from './sid.js'
import type { Table } from './router.js'
import { endServiceSessions } from './lifecycle.js'

export const GEO_MATCH_LEVELS = ['area-code', 'overlay', 'radius', 'country', 'extended-area-code'] as const
export const SELECTION_BEHAVIORS = ['avoid-sticky', 'prefer-sticky'] as const
const MAX_TTL = 2_147_483_646

function url(p: Params, name: string): string | null | undefined {
  const v = p.str(name, 4000)
  if (v === undefined) return undefined
  if (v === '') return null
  if (!/^https?:\/\/[^\s]+$/i.test(v)) throw invalidParam(name)
  return v
}

function fields(p: Params): Partial<ServiceFields> {
  const name = p.str('UniqueName', 191)
  if (name !== undefined && name === '') throw invalidParam('UniqueName')
  const chat = p.str('ChatInstanceSid', 34)
  if (chat !== undefined && chat !== '' && !/^IS[0-9a-fA-F]{32}$/.test(chat)) throw invalidParam('ChatInstanceSid')
  return {
    unique_name: name, default_ttl: p.int('DefaultTtl', 0, MAX_TTL), callback_url: url(p, 'CallbackUrl'),
    geo_match_level: p.oneOf('GeoMatchLevel', GEO_MATCH_LEVELS), number_selection_behavior: p.oneOf('NumberSelectionBehavior', SELECTION_BEHAVIORS),
    intercept_callback_url: url(p, 'InterceptCallbackUrl'), out_of_session_callback_url: url(p, 'OutOfSessionCallbackUrl'),
    chat_instance_sid: chat === undefined ? undefined : chat === '' ? null : chat,
  } as Partial<ServiceFields>
}

const nameTaken = () => rule(80602, 'Service with this UniqueName already exists', 409)

/** The Service of `ref` (a KS SID; with `byName`, a UniqueName too), or 404. */
export async function serviceOf(c: Ctx, ref: string, byName = false): Promise<ServiceRow> {
  const id = uuidOf('KS', ref)
  const row = id ? await getService(c.services.db, c.auth.tenantId, { id }) : byName ? await getService(c.services.db, c.auth.tenantId, { uniqueName: ref }) : null
  if (!row) throw notFound(c.path)
  return row
}

export const serviceRoutes: Table = [
  ['Services', {
    async POST(c) {
      const f = fields(c.params)
      if (f.unique_name === undefined) throw invalidParam('UniqueName')
      const row = await insertService(c.services.db, c.auth.tenantId, uuidv7(c.now), {
        unique_name: f.unique_name, default_ttl: f.default_ttl ?? 0, callback_url: f.callback_url ?? null,
        geo_match_level: f.geo_match_level ?? 'country', number_selection_behavior: f.number_selection_behavior ?? 'prefer-sticky',
        intercept_callback_url: f.intercept_callback_url ?? null, out_of_session_callback_url: f.out_of_session_callback_url ?? null,
        chat_instance_sid: f.chat_instance_sid ?? null,
      }, c.now)
      if (row === 'conflict') throw nameTaken()
      return { status: 201, body: serviceJson(c.base, c.auth.accountSid, row) }
    },
    async GET(c) {
      const req = pageRequest(c.params)
      const page = await listServices(c.services.db, c.auth.tenantId, req)
      return { status: 200, body: listBody('services', c.base, '/Services', { ...req, tokenText: c.params.str('PageToken') }, page, page.rows.map(r => serviceJson(c.base, c.auth.accountSid, r))) }
    },
  }],
  ['Services/*', {
    async GET(c) {
      return { status: 200, body: serviceJson(c.base, c.auth.accountSid, await serviceOf(c, c.segs[1]!, true)) }
    },
    async POST(c) {
      const s = await serviceOf(c, c.segs[1]!)
      const row = await updateService(c.services.db, c.auth.tenantId, s.id, fields(c.params), c.now)
      if (row === 'conflict') throw nameTaken()
      if (!row) throw notFound(c.path)
      return { status: 200, body: serviceJson(c.base, c.auth.accountSid, row) }
    },
    async DELETE(c) {
      const s = await serviceOf(c, c.segs[1]!)
      await endServiceSessions(c, s.id)
      const numbers = await servicePhoneNumbers(c.services.db, s.id)
      if (!await deleteService(c.services.db, c.auth.tenantId, s.id)) throw notFound(c.path)
      for (const n of numbers) await c.deps.native.unbind(c.auth.tenantId, n.number)
      return { status: 204 }
    },
  }],
]
