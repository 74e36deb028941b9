// Executes the engine's decisions (style 3): a command is planned by the pure engine, committed to
// Postgres (allocation, quota, outbox and billing in one transaction), and only then applied to
// the engine's memory, announced to the other nodes and fanned out to the WebSocket stream.
// Commands on one session run one at a time through the engine's mailboxes.
import type { DatabasePool } from 'slonik'
import { type Engine, type Mailboxes, type EngineEvent, type LiveSnapshot, type Plan } from '../../engine/index.js'
import { Channel, type E164, type SessionId, type SessionRecord, type TenantId } from '../../engine/types.js'
import { buildEnvelope, type EventEnvelope } from '../../sql/vocabulary/event-envelope.js'
import { uuidv7 } from '../../sql/vocabulary/ids.js'
import { ApiProblem, JsonText } from '../route.js'
import type { CreateSessionBody, PatchSessionBody, SessionView } from '../schemas/session.js'
import { jsonbText } from '../../sql/jsonb-text.js'
import * as store from '../../sql/sessions.js'
import type { TenantDirectory } from './tenant-directory.js'
import { isoTime as iso } from '../../sql/vocabulary/iso-time.js'
import type { Hub } from '../../sql/hub.js'
import { bindTenantNumber, createPinned, unbindTenantNumber, type PinnedCreateInput } from './pinned-create.js'
import { createExpiry } from './session-expiry.js'
import { checkMetadataSize, viewJson, viewOf } from './session-view.js'

export interface RunnerDeps {
  db: DatabasePool
  engine: Engine
  mailboxes: Mailboxes
  tenants: TenantDirectory
  cipher: { encrypt(e164: string): Buffer; decrypt(b: Buffer): string }
  hashParty: (salt: Buffer, e164: string) => string
  now: () => number
  /** After commit, `session` (other nodes, the WebSocket stream, the webhook dispatcher). */
  hub: Hub
  /**
   * Commits what the record writer holds (call and SMS records and their events). Awaited before a
   * session command commits, so an event of a call routed on this node before the command has a
   * smaller id AND is in the outbox first: the dispatcher, which delivers a session's pending
   * events by id, can never send the later session event before it (contract D6: order per session).
   */
  flushRecords?: () => Promise<void>
  /** Other nodes share the database (REDIS_URL): memory may miss a session created elsewhere. */
  otherNodes: boolean
}

export interface CreateResult { status: number; body: unknown; replayed: boolean }

const MAX_ALLOCATION_TRIES = 8
const MINUTE = 60_000
/** stickyProxy (contract D10): how far back a pair's previous session counts. */
const STICKY_WINDOW_MS = 30 * 24 * 60 * MINUTE

/** contract D10: the API's channel names as the engine's bits; absent: both (undefined). */
function channelBits(names: readonly ('voice' | 'sms')[] | undefined): number | undefined {
  if (names === undefined) return undefined
  return (names.includes('voice') ? Channel.VOICE : 0) | (names.includes('sms') ? Channel.SMS : 0)
}

export function envelopesOf(events: EngineEvent[]): EventEnvelope[] {
  // The id is minted now, as the change is written (createdAt says when it happened): a resumed
  // stream takes ids in the order they commit, within its settle time (gateway/stream/settle.ts).
  return events.map(e => buildEnvelope(uuidv7(), e.type, e.at, {
    sessionId: e.sessionId,
    tenantId: e.tenantId,
    proxyNumber: e.proxyNumber,
    state: e.state,
    ...(e.type === 'session.target_swapped' ? { timestamp: iso(e.at) } : {}),
  }))
}

export function createSessionRunner(d: RunnerDeps) {
  /** Postgres has committed: memory must follow even if a racing plan from this node got there
   * first (commit refuses a clash; load() makes memory match the committed record). */
  function commitOrLoad(plan: Extract<Plan, { ok: true }>) {
    try { d.engine.commit(plan) } catch { d.engine.load(plan.next) }
  }

  async function create(tenantId: string, body: CreateSessionBody, idempotency?: { key: string; requestHash: string }): Promise<CreateResult> {
    const tenant = await d.tenants.get(tenantId)
    if (!tenant) throw new ApiProblem('unauthorized')
    checkMetadataSize(body.metadata)
    // contract D4: omitted optional fields take the tenant's defaults.
    const recordingEnabled = body.recordingEnabled ?? tenant.recordingEnabled
    const consentPrompt = body.consentPrompt ?? tenant.recordingConsentMode
    if (recordingEnabled && consentPrompt === 'NONE') {
      // R-REC
      throw new ApiProblem('validation', 'recording cannot be enabled with consentPrompt NONE', {
        errors: [{ field: 'consentPrompt', issue: 'invalid_combination' }],
      })
    }
    if (body.agentPhone === body.customerPhone) {
      throw new ApiProblem('validation', 'agentPhone and customerPhone must differ', {
        errors: [{ field: 'customerPhone', issue: 'same_as_agent' }],
      })
    }
    const now = d.now()
    const id = uuidv7(now) as SessionId
    const input = {
      id,
      tenantId: tenantId as TenantId,
      agentPhone: body.agentPhone as E164,
      customerPhone: body.customerPhone as E164,
      directionMode: body.directionMode ?? 'BIDIRECTIONAL',
      gracePeriodMinutes: body.gracePeriodMinutes ?? tenant.defaultGracePeriod,
      maxDurationMinutes: body.maxDurationMinutes ?? 120,
      recordingEnabled,
      consentPrompt,
      ...(body.channels !== undefined ? { channels: channelBits(body.channels) } : {}),
      ...(body.inactivityTimeoutMinutes !== undefined ? { inactivityTimeoutMinutes: body.inactivityTimeoutMinutes } : {}),
      preferProxy: null as E164 | null,
    }
    const metadata = body.metadata ?? {}
    const agentHash = d.hashParty(tenant.salt, input.agentPhone)
    const customerHash = d.hashParty(tenant.salt, input.customerPhone)
    if (body.stickyProxy === true) {
      // contract D10: one indexed read, for sticky creates only (the create itself stays one
      // statement). The engine tries this proxy first under the usual rules, then allocates as usual.
      input.preferProxy = await store.findStickyProxy(d.db, { tenantId, agentHash, customerHash, since: now - STICKY_WINDOW_MS }) as E164 | null
    }
    const agentEnc = d.cipher.encrypt(input.agentPhone)
    const customerEnc = d.cipher.encrypt(input.customerPhone)
    const exclude = new Set<string>()
    for (let attempt = 0; attempt < MAX_ALLOCATION_TRIES; attempt++) {
      const plan = d.engine.planCreate(input, now, exclude)
      if (!plan.ok) {
        if (idempotency) {
          // A retry of a request that succeeded on another node must still replay, not fail.
          const replay = await store.findIdempotent(d.db, tenantId, idempotency.key)
          if (replay) return replayOf(replay, idempotency.requestHash)
        }
        throw new ApiProblem(plan.rejection)
      }
      const envelopes = envelopesOf(plan.events)
      const view = viewOf(plan.next, metadata, 0, null)
      const res = await store.createSession(d.db, {
        rec: plan.next,
        metadata,
        agentHash,
        customerHash,
        agentEnc,
        customerEnc,
        quota: tenant.concurrentSessions,
        events: envelopes,
        ...(idempotency ? { idempotency: { ...idempotency, status: 201, response: view } } : {}),
      })
      if (res === 'ok') {
        commitOrLoad(plan)
        if (body.metadata !== undefined) d.engine.live(id)?.setMetadata(jsonbText(metadata))
        d.hub.emit('session', id, plan.next.version, envelopes)
        return { status: 201, body: view, replayed: false }
      }
      if (res === 'tier-session-limit') throw new ApiProblem('tier-session-limit')
      if (res === 'proxy-conflict') {
        // Another node took this proxy (or a participant on it) first: the database refused the
        // overlap; try the next candidate.
        exclude.add(plan.next.proxyNumber)
        continue
      }
      return replayOf(res.idempotentReplay, idempotency?.requestHash ?? '')
    }
    throw new ApiProblem('pool-exhausted')
  }

  function replayOf(r: { requestHash: string; status: number; response: unknown }, requestHash: string): CreateResult {
    if (r.requestHash !== requestHash) {
      throw new ApiProblem('conflict', 'Idempotency-Key was already used with a different request body')
    }
    return { status: r.status, body: r.response, replayed: true }
  }

  /** The current record: memory for live sessions, Postgres for the rest. */
  async function load(tenantId: string, id: string): Promise<SessionRecord> {
    const live = d.engine.get(id as SessionId)
    if (live) {
      if (live.tenantId !== tenantId) throw new ApiProblem('not-found')
      return live
    }
    const rec = await store.getSessionRecord(d.db, id, d.cipher)
    if (!rec || rec.tenantId !== tenantId) throw new ApiProblem('not-found')
    return rec
  }

  async function apply(tenantId: string, id: string, msg: Parameters<Engine['plan']>[1], extra: { metadataPatch?: Record<string, unknown> } = {}): Promise<SessionView> {
    return d.mailboxes.run(id, async () => {
      for (let attempt = 0; ; attempt++) {
        const prev = await load(tenantId, id)
        const now = d.now()
        const plan: Plan = d.engine.plan(prev, msg, now)
        if (!plan.ok) throw new ApiProblem(plan.rejection)
        const patch = extra.metadataPatch
        const changed = plan.next.version !== prev.version
        if (!changed && !patch) return await view(tenantId, id)
        // A metadata change is a new version too, so other nodes reload the session (metadata
        // included) and a PATCH racing another node's is replanned, not lost.
        const next = changed ? plan.next : { ...plan.next, version: prev.version + 1 }
        const live = d.engine.live(id as SessionId)?.snapshot()
        const envelopes = envelopesOf(plan.events)
        // contract D10: a PATCH that changes the inactivity timeout restarts its clock.
        const restart = msg.type === 'patch' && (prev.inactivityTimeoutMinutes ?? null) !== (next.inactivityTimeoutMinutes ?? null)
        let swap: store.SwapArgs | undefined
        let audit: { action: string; data: object } | undefined
        if (msg.type === 'swap-target' && changed) {
          const tenant = await d.tenants.get(tenantId)
          if (!tenant) throw new ApiProblem('not-found')
          const oldCustomerHash = d.hashParty(tenant.salt, prev.customerPhone)
          const newCustomerHash = d.hashParty(tenant.salt, plan.next.customerPhone)
          swap = { oldCustomerHash, newCustomerHash, newCustomerEnc: d.cipher.encrypt(plan.next.customerPhone) }
          // Contract 4.2: the audit entry holds hashes, never phone numbers.
          audit = { action: 'session.target_swapped', data: { previousPartyBHash: oldCustomerHash, newPartyBHash: newCustomerHash } }
        }
        await d.flushRecords?.()
        const res = await store.updateSession(d.db, {
          prev,
          next,
          ...(patch ? { metadataPatch: patch } : {}),
          ...(swap ? { swap } : {}),
          ...(audit ? { audit } : {}),
          ...(restart ? { activityFrom: now } : {}),
          events: envelopes,
        })
        if (res === 'stale') {
          // Another node changed the session first: reload its committed state and replan.
          const fresh = await store.getLiveSessionState(d.db, id, d.cipher)
          if (fresh) d.engine.load(fresh.rec, fresh.extras)
          if (attempt < 3) continue
          throw new ApiProblem('internal')
        }
        if (res === 'proxy-conflict') throw new ApiProblem('target-conflict')
        commitOrLoad({ ...plan, next })
        if (restart) d.engine.live(id as SessionId)?.noteActivity(now)
        // jsonb's `||`, as the UPDATE did: the patch's top-level keys replace.
        if (patch && live) d.engine.live(id as SessionId)?.setMetadata(jsonbText({ ...JSON.parse(live.metadataJson) as object, ...patch }))
        d.hub.emit('session', id, next.version, envelopes)
        return await view(tenantId, id)
      }
    })
  }

  /**
   * From memory (contract D4). A miss is the answer when memory holds every live session (one node);
   * with other nodes, a session one of them created moments ago may not have reached this one yet,
   * so a miss asks Postgres.
   */
  async function verify(tenantId: string, userPhone: string) {
    const live = d.engine.findByParty(tenantId, userPhone)?.snapshot()
    if (live) {
      const r = live.record
      // The number this party dials: its own proxy (the customer's differs in a dual-proxy session, docs/dual-proxy.md).
      const proxyNumber = r.customerPhone === userPhone ? r.customerProxyNumber ?? r.proxyNumber : r.proxyNumber
      return { sessionId: r.id, proxyNumber, metadata: JSON.parse(live.metadataJson) as Record<string, unknown> }
    }
    if (!d.otherNodes) return null
    const tenant = await d.tenants.get(tenantId)
    if (!tenant) throw new ApiProblem('unauthorized')
    const found = await store.findLiveByPartyHash(d.db, tenantId, d.hashParty(tenant.salt, userPhone))
    return found && { sessionId: found.id, proxyNumber: found.proxyNumber, metadata: found.metadata }
  }

  /**
   * A live session from memory (contract D4), synchronously: no promise, no await on the hot read;
   * any other from Postgres. May throw (not-found of another tenant's live session) as well as reject.
   */
  function view(tenantId: string, id: string): SessionView | Promise<SessionView> {
    const live = liveOf(tenantId, id)
    return live ? viewOf(live.record, JSON.parse(live.metadataJson) as Record<string, unknown>, live.callCount, live.lastCallAt) : stored(tenantId, id)
  }

  /** GET /v1/sessions/:id: view() with a live session's answer written as JSON text (viewJson). */
  function read(tenantId: string, id: string): JsonText | Promise<SessionView> {
    const live = liveOf(tenantId, id)
    return live ? viewJson(live.record, live.metadataJson, live.callCount, live.lastCallAt) : stored(tenantId, id)
  }

  /** The tenant's live session; not-found when it is another tenant's. */
  function liveOf(tenantId: string, id: string): LiveSnapshot | undefined {
    const live = d.engine.live(id as SessionId)?.snapshot()
    if (live && live.record.tenantId !== tenantId) throw new ApiProblem('not-found')
    return live
  }

  function stored(tenantId: string, id: string): Promise<SessionView> {
    return store.getSession(d.db, tenantId, id).then(v => {
      if (!v) throw new ApiProblem('not-found')
      return v as SessionView
    })
  }

  return {
    create,
    /** docs/dual-proxy.md: a session on the numbers given (api/app/pinned-create.ts). */
    createPinned: (tenantId: string, body: PinnedCreateInput) => createPinned(d, tenantId, body),
    bindNumber: (tenantId: string, number: string) => bindTenantNumber(d, tenantId, number),
    unbindNumber: (tenantId: string, number: string) => unbindTenantNumber(d, tenantId, number),
    get: read,
    verify,
    end: (tenantId: string, id: string) => apply(tenantId, id, { type: 'end' }),
    swapTarget: (tenantId: string, id: string, customerPhone: string) =>
      apply(tenantId, id, { type: 'swap-target', customerPhone: customerPhone as E164 }),
    patch: (tenantId: string, id: string, body: PatchSessionBody) => {
      checkMetadataSize(body.metadata)
      return apply(tenantId, id, {
        type: 'patch',
        ...(body.gracePeriodMinutes !== undefined ? { gracePeriodMinutes: body.gracePeriodMinutes } : {}),
        ...(body.inactivityTimeoutMinutes !== undefined ? { inactivityTimeoutMinutes: body.inactivityTimeoutMinutes } : {}),
      }, body.metadata ? { metadataPatch: body.metadata } : {})
    },
    expireDue: createExpiry(d, commitOrLoad),
  }
}

export type SessionRunner = ReturnType<typeof createSessionRunner>
