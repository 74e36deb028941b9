// Random sequences of create / end / swap / patch / advance+tick against the invariants of contract 3.1,
// 8.2 and contract D4, checked after every step from the outside (get, route, poolCounts, tenantsLiveIn):
// - no proxy carries two live sessions sharing a participant, nor sessions of two tenants;
// - pool counts add up to the total and match the numbers in use and cooling down;
// - no live session outlives its expiresAt past one tick;
// - the quota count equals the live sessions of each tenant;
// - every live participant routes to its own session, a swapped-away customer does not;
// - the pool alert's recipients (tenantsLiveIn) are the tenants with a live session in the region;
// - pool-exhausted only when no number fits; events never carry a party's number.
import t from 'tap'
import fc from 'fast-check'
import { Engine, TIER_LIMITS, expiryEvent, type E164, type EngineEvent, type SessionId, type SessionRecord } from '../../engine/index.js'
import { MINUTE, T0, TENANT_A, TENANT_B, gb, input, us } from './helpers.js'

const COOLDOWN = 5 * MINUTE
const LIMIT = 4
const POOL = [
  { number: us(0), region: 'US', provider: 'telnyx' },
  { number: us(1), region: 'US', provider: 'telnyx' },
  { number: us(2), region: 'US', provider: 'backup' },
  { number: gb(0), region: 'GB', provider: 'telnyx' },
]
const PARTIES: E164[] = [us(50), us(51), us(52), us(53), us(54), us(55), gb(50), gb(51)]
const TENANTS = [TENANT_A, TENANT_B]

type Cmd =
  | { c: 'create'; tenant: number; agent: number; customer: number; mode: number; grace: number; max: number }
  | { c: 'end'; k: number }
  | { c: 'swap'; k: number; customer: number }
  | { c: 'patch'; k: number; grace: number }
  | { c: 'advance'; ms: number }

const cmdArb: fc.Arbitrary<Cmd> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ c: fc.constant('create' as const), tenant: fc.nat(1), agent: fc.nat(7), customer: fc.nat(7), mode: fc.nat(2), grace: fc.nat(10), max: fc.integer({ min: 1, max: 30 }) }) },
  { weight: 2, arbitrary: fc.record({ c: fc.constant('end' as const), k: fc.nat() }) },
  { weight: 2, arbitrary: fc.record({ c: fc.constant('swap' as const), k: fc.nat(), customer: fc.nat(7) }) },
  { weight: 1, arbitrary: fc.record({ c: fc.constant('patch' as const), k: fc.nat(), grace: fc.nat(10) }) },
  { weight: 3, arbitrary: fc.record({ c: fc.constant('advance' as const), ms: fc.integer({ min: 0, max: 12 * MINUTE }) }) },
)

const MODES = ['BIDIRECTIONAL', 'A_TO_B_ONLY', 'B_TO_A_ONLY'] as const

/** How often each outcome came up over all runs: the generators must reach every branch. */
const seen = new Map<string, number>()
const note = (what: string) => seen.set(what, (seen.get(what) ?? 0) + 1)

function fail(msg: string): never {
  throw new Error(msg)
}

function run(cmds: Cmd[]): void {
  const limits = { ...TIER_LIMITS, STARTER: { requestsPerMinute: 100, concurrentSessions: LIMIT } }
  const engine = new Engine({ cooldownMs: COOLDOWN, limits })
  for (const tn of TENANTS) engine.upsertTenant(tn)
  engine.addNumbers(POOL)
  // What production announces: committed plans' events and expiryEvent of expired records.
  const events: EngineEvent[] = []
  let now = T0
  const ids: SessionId[] = []
  const swappedAway: Array<{ proxy: E164; customer: E164; id: SessionId }> = []
  const releasedAt = new Map<string, number>()
  let inUseBefore = new Set<E164>()

  const live = (): SessionRecord[] => ids.map(id => engine.get(id)).filter((r): r is SessionRecord => r !== undefined)

  /** Whether a create for these parties could use this number (contract D4), by brute force. */
  const fits = (number: string, tenantId: string, agent: E164, customer: E164, sessions: SessionRecord[]) => {
    const on = sessions.filter(s => s.proxyNumber === number)
    if (on.length === 0) return (releasedAt.get(number) ?? -Infinity) + COOLDOWN <= now
    return on[0]!.tenantId === tenantId && on.every(s => ![s.agentPhone, s.customerPhone].some(p => p === agent || p === customer))
  }

  for (const cmd of cmds) {
    const sessions = live()
    const pick = (k: number) => sessions.length === 0 ? undefined : sessions[k % sessions.length]
    if (cmd.c === 'create') {
      if (cmd.agent === cmd.customer) continue // refused at the API
      const tenantId = TENANTS[cmd.tenant]!.id
      const inp = input({ tenantId, agentPhone: PARTIES[cmd.agent], customerPhone: PARTIES[cmd.customer], directionMode: MODES[cmd.mode], gracePeriodMinutes: cmd.grace, maxDurationMinutes: cmd.max })
      const plan = engine.planCreate(inp, now)
      note(plan.ok ? 'created' : plan.rejection)
      if (plan.ok) {
        if (engine.commit(plan)) events.push(...plan.events)
        ids.push(inp.id)
      } else if (plan.rejection === 'tier-session-limit') {
        if (engine.liveCount(tenantId) < LIMIT) fail('quota refused below the limit')
      } else if (plan.rejection === 'pool-exhausted') {
        const usable = POOL.filter(p => fits(p.number, tenantId, inp.agentPhone, inp.customerPhone, sessions))
        if (usable.length > 0) fail(`pool-exhausted while ${usable.map(p => p.number).join(',')} fit`)
      } else fail(`unexpected ${plan.rejection}`)
    } else if (cmd.c === 'end' || cmd.c === 'patch' || cmd.c === 'swap') {
      const rec = pick(cmd.k)
      if (rec === undefined) continue
      const msg = cmd.c === 'end' ? { type: 'end' as const }
        : cmd.c === 'patch' ? { type: 'patch' as const, gracePeriodMinutes: cmd.grace }
          : { type: 'swap-target' as const, customerPhone: PARTIES[cmd.customer]! }
      const plan = engine.plan(rec, msg, now)
      note(plan.ok ? (plan.changed ? `${msg.type} applied` : `${msg.type} unchanged`) : `${msg.type} ${plan.rejection}`)
      if (plan.ok) {
        if (engine.commit(plan)) events.push(...plan.events)
        if (msg.type === 'swap-target' && plan.changed) {
          // Swapping back to an earlier customer wires them again.
          const back = swappedAway.findIndex(w => w.id === rec.id && w.customer === msg.customerPhone)
          if (back >= 0) swappedAway.splice(back, 1)
          swappedAway.push({ proxy: rec.proxyNumber, customer: rec.customerPhone, id: rec.id })
        }
      } else if (msg.type === 'swap-target' && plan.rejection === 'target-conflict') {
        const other = sessions.find(s => s.id !== rec.id && s.proxyNumber === rec.proxyNumber && (s.agentPhone === msg.customerPhone || s.customerPhone === msg.customerPhone))
        if (other === undefined && (rec.state === 'ACTIVE' || rec.state === 'GRACE_PERIOD')) fail('target-conflict without a conflict')
      } else if (!(msg.type === 'swap-target' && plan.rejection === 'invalid-target' && msg.customerPhone === rec.agentPhone)) {
        fail(`unexpected ${plan.rejection}`)
      }
    } else {
      now += cmd.ms
      for (const r of engine.tick(now)) {
        note('expired')
        events.push(expiryEvent(r))
        if (r.state !== 'EXPIRED' || r.expiredAt !== now) fail('tick returned a non-expired record')
      }
    }

    // Invariants.
    const after = live()
    if (engine.size() !== after.length) fail(`size ${engine.size()} but ${after.length} live`)
    const inUse = new Set(after.map(s => s.proxyNumber))
    for (const p of inUseBefore) if (!inUse.has(p)) releasedAt.set(p, now)
    inUseBefore = inUse
    for (const p of inUse) {
      const on = after.filter(s => s.proxyNumber === p)
      const parties = on.flatMap(s => [s.agentPhone, s.customerPhone])
      if (new Set(parties).size !== parties.length) fail(`proxy ${p} carries a participant twice`)
      if (new Set(on.map(s => s.tenantId)).size !== 1) fail(`proxy ${p} carries two tenants`)
    }
    for (const s of after) {
      const due = s.expiresAt <= now
      // A tick just ran at now: nothing due may be left. Between ticks a due session (ended with
      // grace 0, grace shortened into the past) is still held but no longer routes.
      if (due && cmd.c === 'advance') fail(`session ${s.id} outlived expiresAt past a tick`)
      for (const [caller, role] of [[s.agentPhone, 'A_TO_B'], [s.customerPhone, 'B_TO_A']] as const) {
        const d = engine.route(s.proxyNumber, caller, now)
        if (due) {
          if (d.kind !== 'no-session') fail('a due session still routes')
          continue
        }
        if (d.kind !== 'connect' && d.kind !== 'direction-not-allowed') fail(`live party gets ${d.kind}`)
        if (d.sessionId !== s.id || d.direction !== role) fail('party routed to the wrong session')
      }
    }
    for (const w of swappedAway) {
      const d = engine.route(w.proxy, w.customer, now)
      if ((d.kind === 'connect' || d.kind === 'direction-not-allowed') && d.sessionId === w.id) fail('a swapped-away customer still routes')
    }
    for (const tn of TENANTS) {
      if (engine.liveCount(tn.id) !== after.filter(s => s.tenantId === tn.id).length) fail('quota count drifted')
    }
    for (const c of engine.poolCounts(now)) {
      if (c.available + c.inUse + c.cooldown !== c.total) fail('pool counts do not add up')
      const group = POOL.filter(p => p.region === c.region && p.provider === c.provider).map(p => p.number)
      const used = group.filter(n => inUse.has(n)).length
      const cooling = group.filter(n => !inUse.has(n) && (releasedAt.get(n) ?? -Infinity) + COOLDOWN > now).length
      if (c.inUse !== used || c.cooldown !== cooling || c.total !== group.length) fail(`pool counts ${JSON.stringify(c)} vs inUse ${used} cooldown ${cooling}`)
    }
    // The pool alert's recipients: the tenants with a live session on a number of the region.
    for (const region of ['US', 'GB', 'FR']) {
      const want = [...new Set(after.filter(s => POOL.some(p => p.number === s.proxyNumber && p.region === region)).map(s => s.tenantId))].sort()
      const got = engine.tenantsLiveIn(region)
      if (JSON.stringify(got) !== JSON.stringify(want)) fail(`tenantsLiveIn(${region}) ${JSON.stringify(got)} vs ${JSON.stringify(want)}`)
    }
  }
  const json = JSON.stringify(events)
  for (const p of PARTIES) if (json.includes(p)) fail('an event carries a party number')
}

t.test('invariants hold over random command sequences', async t => {
  fc.assert(fc.property(fc.array(cmdArb, { minLength: 10, maxLength: 120, size: 'max' }), cmds => { run(cmds) }), { numRuns: 400 })
  for (const what of ['created', 'pool-exhausted', 'tier-session-limit', 'end applied', 'patch applied', 'swap-target applied',
    'swap-target unchanged', 'swap-target target-conflict', 'swap-target invalid-target', 'expired']) {
    t.ok((seen.get(what) ?? 0) > 0, `reached: ${what} (${seen.get(what) ?? 0})`)
  }
})
