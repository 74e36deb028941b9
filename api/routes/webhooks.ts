// Contract 4.9: the tenant's webhook (one per tenant), its test event and its delivery log.
// Delivery itself is gateway/webhooks/dispatcher.ts, from the outbox.
import { Type } from '@sinclair/typebox'
import { route, ApiProblem, type ApiRequest, type RouteDef } from '../route.js'
import { Envelope, Nullable, PageQuery, StringEnum, Timestamp } from '../schemas/common.js'
import { buildEnvelope, SUBSCRIBABLE_EVENTS, type EventEnvelope } from '../../sql/vocabulary/event-envelope.js'
import { uuidv7 } from '../../sql/vocabulary/ids.js'
import type { Services } from '../services.js'
import {
  createSecretCipher, getWebhookConfig, listDeliveries, putWebhookConfig, recentDeliveries,
  type SecretCipher,
} from '../../sql/webhooks.js'
import { sqlStateOf } from '../../sql/errors.js'
import { insertOutbox } from '../../sql/outbox.js'
import { checkTenantWebhookUrl } from '../webhook-target.js'
import { generateSecret } from '../webhooks/signing.js'

const RegisterWebhookBody = Type.Object({
  url: Type.String({ minLength: 1, maxLength: 2048 }),
  // session.target_swapped is not in the list: refused with 400 validation (contract D6)
  events: Type.Array(StringEnum(SUBSCRIBABLE_EVENTS), { minItems: 1, maxItems: SUBSCRIBABLE_EVENTS.length * 2 }),
})

const RegisteredWebhook = Type.Object({
  url: Type.String(),
  secret: Type.String({ pattern: '^whsec_' }),
  events: Type.Array(Type.String()),
})

/** Contract 2.8. */
const DeliveryView = Type.Object({
  id: Type.String(),
  event: Type.String(),
  url: Type.String(),
  statusCode: Type.Integer(),
  success: Type.Boolean(),
  attemptCount: Type.Integer(),
  error: Nullable(Type.String()),
  requestedAt: Timestamp,
  completedAt: Timestamp,
})

const WebhookView = Type.Object({
  url: Nullable(Type.String()),
  events: Type.Array(Type.String()),
  hasSecret: Type.Boolean(),
  recentDeliveries: Type.Array(DeliveryView, { maxItems: 50 }),
})

const TestEventView = Type.Object({
  id: Type.String(),
  type: Type.Literal('session.created'),
  createdAt: Timestamp,
  data: Type.Object({
    sessionId: Type.String(),
    tenantId: Type.String(),
    proxyNumber: Type.String(),
    test: Type.Literal(true),
  }),
})

const WebhookTestResult = Type.Object({ enqueued: Type.Literal(true), event: TestEventView })

/** Contract 8.5: limit 50 by default, 200 at most; `after` is the cursor of sql/webhooks.ts. */
const WebhookLogsQuery = Type.Object(PageQuery(50, 200))

/** A fictional number (NANP 555-01XX, reserved for drama) so the test event carries no real one. */
const TEST_PROXY_NUMBER = '+15555550100'

const ciphers = new WeakMap<Buffer, SecretCipher>()
function cipherOf(s: Services): SecretCipher {
  let c = ciphers.get(s.phoneKey)
  if (!c) { c = createSecretCipher(s.phoneKey); ciphers.set(s.phoneKey, c) }
  return c
}

function wakeDispatcher(s: Services): void {
  s.webhookDispatcher.wake()
}

const tenantOf = (req: ApiRequest): string => req.auth!.tenantId

export const webhookRoutes: RouteDef[] = [
  route({
    method: 'POST', path: '/v1/webhooks', auth: 'tenant', summary: 'Register (or replace) the webhook',
    body: RegisterWebhookBody, response: { 201: RegisteredWebhook },
    problems: ['validation', 'unauthorized', 'forbidden', 'rate-limit', 'not-found'],
    async handler(req) {
      const s = req.services
      const target = await checkTenantWebhookUrl(s, req.body.url, { slug: 'validation', field: 'url' })
      const tenantId = tenantOf(req)
      const events = [...new Set(req.body.events)]
      const secret = generateSecret()
      const url = target.href
      try {
        await putWebhookConfig(s.db, { tenantId, url, events, secretEnc: cipherOf(s).encrypt(secret), now: s.now() })
      } catch (err) {
        if (sqlStateOf(err) === '23503') throw new ApiProblem('not-found', 'tenant not found')
        throw err
      }
      return { status: 201, body: { url, secret, events } }
    },
  }),
  route({
    method: 'GET', path: '/v1/webhooks', auth: 'tenant', summary: 'The webhook and its latest deliveries',
    response: { 200: WebhookView },
    problems: ['unauthorized', 'forbidden', 'rate-limit', 'not-found'],
    async handler(req) {
      const tenantId = tenantOf(req)
      const [cfg, recent] = await Promise.all([
        getWebhookConfig(req.services.db, tenantId),
        recentDeliveries(req.services.db, tenantId, 50),
      ])
      return {
        status: 200,
        body: { url: cfg?.url ?? null, events: cfg?.events ?? [], hasSecret: cfg !== null, recentDeliveries: recent },
      }
    },
  }),
  route({
    method: 'POST', path: '/v1/webhooks/test', auth: 'tenant', summary: 'Send a synthetic session.created',
    response: { 202: WebhookTestResult },
    problems: ['no-webhook', 'unauthorized', 'forbidden', 'rate-limit', 'not-found'],
    async handler(req) {
      const s = req.services
      const tenantId = tenantOf(req)
      const cfg = await getWebhookConfig(s.db, tenantId)
      if (!cfg) throw new ApiProblem('no-webhook')
      const now = s.now()
      const event: EventEnvelope = buildEnvelope(uuidv7(now), 'session.created', now, {
        sessionId: uuidv7(now), tenantId, proxyNumber: TEST_PROXY_NUMBER, test: true,
      })
      // Through the outbox like any event: signed, retried and logged the same way. Its session
      // id is fresh, so it waits behind nothing.
      await insertOutbox(s.db, [event])
      wakeDispatcher(s)
      return { status: 202, body: { enqueued: true, event } }
    },
  }),
  route({
    method: 'GET', path: '/v1/webhooks/logs', auth: 'tenant', summary: 'Delivery attempts, newest first',
    query: WebhookLogsQuery, response: { 200: Envelope(DeliveryView) },
    problems: ['validation', 'unauthorized', 'forbidden', 'rate-limit', 'not-found'],
    async handler(req) {
      const q = req.query as { limit?: number; after?: string }
      const page = await listDeliveries(req.services.db, { tenantId: tenantOf(req), limit: q.limit ?? 50, after: q.after })
      if (page === 'bad-cursor') {
        throw new ApiProblem('validation', 'after must be a cursor from pagination.after or an ISO 8601 timestamp', {
          errors: [{ field: 'after', issue: 'invalid_cursor' }],
        })
      }
      return { status: 200, body: { data: page.data, pagination: { count: page.data.length, after: page.after } } }
    },
  }),
]
