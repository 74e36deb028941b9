// Contract 4.8: the number pool. Counts come from the engine (services.poolCounts), which owns the
// pool in memory; provisioning is not implemented yet (501 with `{error}`, contract 7.2).
import { Type } from '@sinclair/typebox'
import { route, type RouteDef } from '../route.js'

const PoolEntryView = Type.Object({
  region: Type.String(),
  provider: Type.Optional(Type.String()),
  total: Type.Integer(),
  available: Type.Integer(),
  inUse: Type.Integer(),
  cooldown: Type.Integer(),
})

const ProvisionBody = Type.Object({
  region: Type.String({ pattern: '^[A-Za-z]{2}$', description: 'ISO 3166-1 alpha-2 region, e.g. US' }),
  count: Type.Integer({ minimum: 1, maximum: 100 }),
})

export const numberRoutes: RouteDef[] = [
  route({
    method: 'GET', path: '/v1/numbers/pool', auth: 'tenant', summary: 'Pool counts per region and provider',
    response: { 200: Type.Object({ pools: Type.Array(PoolEntryView) }) }, problems: ['unauthorized', 'forbidden', 'rate-limit'],
    handler(req) {
      return { status: 200, body: { pools: req.services.poolCounts() } }
    },
  }),
  route({
    method: 'POST', path: '/v1/numbers/provision', auth: 'user', roles: ['OWNER'], summary: 'Provision numbers (not implemented: 501)',
    body: ProvisionBody, response: { 501: Type.Object({ error: Type.String() }) }, problems: ['validation', 'unauthorized', 'forbidden', 'rate-limit'],
    handler() {
      return { status: 501, body: { error: 'Number provisioning is not implemented yet; numbers come from NUMBER_POOL' } }
    },
  }),
]
