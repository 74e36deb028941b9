// Webhook dispatcher (contract D6): drains the Postgres outbox, at least once. Any number of
// nodes run one each against the same database; `claimDue` leases disjoint rows, so each event
// is attempted by one node at a time, and a node that dies mid-delivery loses its lease and the
// event is redelivered by whoever claims it next.
import type { DatabasePool } from 'slonik'
import type { Logger } from 'pino'
import { uuidv7 } from '../../sql/vocabulary/ids.js'
import {
  claimDue, getWebhookConfig, insertDelivery, markDone, markRetry, succeededUrls, type NewDelivery, type OutboxEvent, type SecretCipher,
} from '../../sql/webhooks.js'
import { signatureHeaders } from '../../api/webhooks/signing.js'
import { createHttpTransport, type WebhookTransport } from './transport.js'

/**
 * contract D6: attempt k (1-based) runs SCHEDULE[k-1] after attempt k-1 failed (the first as soon
 * as the event is committed): 0 s, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h; 8 attempts in all.
 */
export const RETRY_SCHEDULE_MS: readonly number[] = [
  0, 5_000, 5 * 60_000, 30 * 60_000, 2 * 3_600_000, 5 * 3_600_000, 10 * 3_600_000, 10 * 3_600_000,
]

/** The default of DispatcherOptions.wakeGapMs: at most this much added to a delivery's first attempt. */
export const WAKE_GAP_MS = 20

/**
 * session.target_swapped is not subscribable (contract 6) but always delivered to a configured
 * webhook (contract D6); the synthetic event of POST /v1/webhooks/test is delivered whatever
 * the subscription, since its point is to exercise the endpoint.
 */
function alwaysDelivered(ev: OutboxEvent): boolean {
  return ev.type === 'session.target_swapped' || ev.envelope.data?.test === true
}

/** One destination of an event: its URL, and the request for an attempt made at `requestedAt`. */
export interface DeliveryTarget {
  url: string
  sign(requestedAt: number): { body: string; headers: Record<string, string>; contentType?: string }
}

export interface DispatcherOptions {
  pool: DatabasePool
  log: Pick<Logger, 'debug' | 'info' | 'warn' | 'error'>
  now: () => number
  /** WEBHOOK_ALLOW_INSECURE: http:// and private targets (development and tests only). */
  allowInsecure: boolean
  /** Decrypts webhook_configs.secret_enc (sql/webhooks.ts createSecretCipher(phoneKey)). */
  secrets: Pick<SecretCipher, 'decrypt'>
  /** Defaults to the node:http(s) transport with the SSRF guard. */
  transport?: WebhookTransport
  schedule?: readonly number[]
  /** Per attempt (contract D6: 5 s). */
  timeoutMs?: number
  /** Must exceed timeoutMs comfortably: a lease that lapses mid-attempt means a duplicate. */
  leaseMs?: number
  /** Deliveries in flight at once on this node. */
  concurrency?: number
  pollIntervalMs?: number
  /**
   * wake() claims at most once per this many ms (the first wake after a quiet spell at once):
   * every create and every record batch wakes the dispatcher, and a claim per wake, back to back
   * under load, cost a third of the service's CPU per session create (issue 13).
   */
  wakeGapMs?: number
  newId?: () => string
  /**
   * Where else an event goes besides the tenant's webhook (a Twilio Proxy Service's callback_url:
   * gateway/webhooks/twilio-callbacks.ts). Each target is attempted and logged on its own; an
   * event is done once every target has succeeded, and a retry skips those that already did.
   */
  extraTargets?: (ev: OutboxEvent) => Promise<DeliveryTarget[]>
  /** Counts each attempt's outcome (metrics). */
  onOutcome?: (outcome: 'delivered' | 'retry' | 'failed' | 'skipped' | 'error') => void
}

export interface Dispatcher {
  /** Starts polling (every pollIntervalMs, and at once on wake()). */
  start(): void
  /** Stops polling and waits for attempts in flight to be recorded. */
  stop(): Promise<void>
  /** Poll now: call after committing a transaction that wrote outbox rows. */
  wake(): void
  /** Claims one batch and delivers it; resolves with the number of events handled. For tests. */
  runOnce(): Promise<number>
}

export function createDispatcher(opts: DispatcherOptions): Dispatcher {
  const { pool, log, now } = opts
  const schedule = opts.schedule ?? RETRY_SCHEDULE_MS
  const timeoutMs = opts.timeoutMs ?? 5_000
  const leaseMs = opts.leaseMs ?? Math.max(30_000, timeoutMs * 3)
  const concurrency = opts.concurrency ?? 32
  const pollIntervalMs = opts.pollIntervalMs ?? 500
  const wakeGapMs = opts.wakeGapMs ?? WAKE_GAP_MS
  const newId = opts.newId ?? (() => uuidv7())
  const ownTransport = opts.transport ? null : createHttpTransport({ allowInsecure: opts.allowInsecure })
  const transport = opts.transport ?? ownTransport!

  /** What this event goes to: the tenant's webhook, if it wants the event, and any extra target. */
  async function targetsOf(ev: OutboxEvent): Promise<DeliveryTarget[]> {
    const cfg = await getWebhookConfig(pool, ev.tenantId)
    const own: DeliveryTarget[] = cfg && (alwaysDelivered(ev) || cfg.events.includes(ev.type))
      ? [{ url: cfg.url, sign: requestedAt => {
        const body = JSON.stringify(ev.envelope)
        // webhook-id is the event id: the same on every retry, so receivers can deduplicate.
        return { body, headers: { ...signatureHeaders(opts.secrets.decrypt(cfg.secretEnc), ev.id, Math.floor(requestedAt / 1000), body) } }
      } }]
      : []
    const extra = opts.extraTargets ? await opts.extraTargets(ev) : []
    if (extra.length === 0 || ev.attempts <= 1) return [...own, ...extra]
    // A retry goes only where no earlier attempt of this event succeeded.
    const done = new Set(await succeededUrls(pool, ev.tenantId, ev.id))
    return [...own, ...extra].filter(t => !done.has(t.url))
  }

  async function attempt(ev: OutboxEvent, target: DeliveryTarget): Promise<NewDelivery> {
    const requestedAt = now()
    let result: { statusCode: number; error: string | null }
    try {
      const req = target.sign(requestedAt)
      result = await transport({ url: target.url, headers: req.headers, body: req.body, timeoutMs, ...(req.contentType ? { contentType: req.contentType } : {}) })
    } catch (err) {
      log.error({ err, tenantId: ev.tenantId, eventId: ev.id }, 'webhook attempt error')
      result = { statusCode: 0, error: 'internal' }
    }
    const success = result.statusCode >= 200 && result.statusCode < 300
    return {
      id: newId(), tenantId: ev.tenantId, eventId: ev.id, event: ev.type, url: target.url, statusCode: result.statusCode, success,
      attemptCount: ev.attempts, error: success ? null : (result.error ?? `http-${result.statusCode}`), requestedAt, completedAt: now(),
    }
  }

  async function deliver(ev: OutboxEvent): Promise<void> {
    const targets = await targetsOf(ev)
    if (targets.length === 0) {
      await markDone(pool, ev, 'skipped', now())
      opts.onOutcome?.('skipped')
      return
    }
    const results = await Promise.all(targets.map(t => attempt(ev, t)))
    const completedAt = now()
    const success = results.every(r => r.success)
    const error = results.find(r => !r.success)?.error ?? null
    const statusCode = (results.find(r => !r.success) ?? results[0]!).statusCode
    const finalAttempt = ev.attempts >= schedule.length
    await pool.transaction(async tx => {
      for (const r of results) await insertDelivery(tx, r)
      const ours = success ? await markDone(tx, ev, 'delivered', completedAt)
        : finalAttempt ? await markDone(tx, ev, 'failed', completedAt)
          : await markRetry(tx, ev, completedAt + schedule[ev.attempts]!)
      if (!ours) log.warn({ tenantId: ev.tenantId, eventId: ev.id }, 'webhook lease lost during attempt')
    })
    opts.onOutcome?.(success ? 'delivered' : finalAttempt ? 'failed' : 'retry')
    // Never the URL (its query may hold a tenant's token) nor the secret.
    const line = { tenantId: ev.tenantId, eventId: ev.id, type: ev.type, attempt: ev.attempts, statusCode, code: error }
    if (success) log.debug(line, 'webhook delivered')
    else if (finalAttempt) log.warn(line, 'webhook given up')
    else log.info(line, 'webhook attempt failed')
  }

  async function safeDeliver(ev: OutboxEvent): Promise<void> {
    try {
      await deliver(ev)
    } catch (err) {
      // The lease lapses and the event is claimed again: at least once.
      opts.onOutcome?.('error')
      log.error({ err, eventId: ev.id }, 'webhook dispatch error')
    }
  }

  async function claim(limit: number): Promise<OutboxEvent[]> {
    return claimDue(pool, { limit, leaseMs, now: now() })
  }

  // --- polling loop -------------------------------------------------------------------------
  let started = false
  let stopped = false
  let interval: NodeJS.Timeout | undefined
  let pumping = false
  let again = false
  const inflight = new Set<Promise<void>>()
  /** When the last claim started (performance.now()), and the wake waiting for the gap to pass. */
  let lastClaimAt = -Infinity
  let wakeTimer: NodeJS.Timeout | null = null

  async function pump(): Promise<void> {
    if (!started || stopped) return
    if (pumping) { again = true; return }
    pumping = true
    try {
      do {
        again = false
        const free = concurrency - inflight.size
        if (free <= 0) break
        lastClaimAt = performance.now()
        const batch = await claim(free)
        for (const ev of batch) {
          const p = safeDeliver(ev).finally(() => {
            inflight.delete(p)
            void pump() // a slot is free: there may be more due
          })
          inflight.add(p)
        }
        if (batch.length === free) again = true
      } while (again && !stopped)
    } catch (err) {
      log.error({ err }, 'webhook claim failed')
    } finally {
      pumping = false
    }
  }

  return {
    start() {
      if (started) return
      started = true
      interval = setInterval(() => void pump(), pollIntervalMs)
      interval.unref()
      void pump()
    },
    async stop() {
      stopped = true
      if (interval) clearInterval(interval)
      if (wakeTimer) clearTimeout(wakeTimer)
      while (pumping || inflight.size) {
        await Promise.allSettled([...inflight])
        if (pumping) await new Promise(r => setTimeout(r, 5))
      }
      ownTransport?.close()
    },
    wake() {
      if (wakeTimer || !started || stopped) return
      const wait = lastClaimAt + wakeGapMs - performance.now()
      if (wait <= 0 && !pumping) { void pump(); return }
      // A claim ran moments ago or runs now: one more once the gap has passed covers every wake
      // until then (what they wrote is due by then; a full batch is claimed again at once anyway).
      wakeTimer = setTimeout(() => { wakeTimer = null; void pump() }, Math.max(1, wait))
    },
    async runOnce() {
      const batch = await claim(concurrency)
      await Promise.all(batch.map(safeDeliver))
      return batch.length
    },
  }
}
