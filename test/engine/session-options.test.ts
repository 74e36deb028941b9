// contract D10 (stickyProxy, channels) in the engine: channels refuse a call or an SMS the session does not
// carry (before its direction mode), and stickyProxy tries a preferred proxy first under the
// usual allocation rules (one tenant per number in use, cooldown, the overlap rule).
import t from 'tap'
import { Channel } from '../../engine/index.js'
import { AGENT, CUSTOMER, MINUTE, TENANT_B, harness, us } from './helpers.js'

t.test('channels: voice only, SMS only, both', async t => {
  const h = harness()
  const voice = h.create({ channels: Channel.VOICE })
  const sms = h.create({ channels: Channel.SMS, agentPhone: us(51), customerPhone: us(61), directionMode: 'A_TO_B_ONLY' })
  const both = h.create({ agentPhone: us(52), customerPhone: us(62) })
  const now = h.clock.now
  t.match(h.engine.route(voice.proxyNumber, AGENT, now, 'voice'), { kind: 'connect', sessionId: voice.id })
  t.same(h.engine.route(voice.proxyNumber, CUSTOMER, now, 'sms'),
    { kind: 'channel-not-allowed', sessionId: voice.id, tenantId: voice.tenantId, direction: 'B_TO_A' })
  t.match(h.engine.route(sms.proxyNumber, us(51), now, 'sms'), { kind: 'connect', direction: 'A_TO_B' })
  t.match(h.engine.route(sms.proxyNumber, us(51), now, 'voice'), { kind: 'channel-not-allowed', direction: 'A_TO_B' })
  t.match(h.engine.route(sms.proxyNumber, us(61), now, 'voice'), { kind: 'channel-not-allowed', direction: 'B_TO_A' }, 'the channel before the direction mode')
  t.match(h.engine.route(sms.proxyNumber, us(61), now, 'sms'), { kind: 'direction-not-allowed' })
  t.match(h.engine.route(both.proxyNumber, us(62), now, 'voice'), { kind: 'connect' })
  t.match(h.engine.route(both.proxyNumber, us(62), now, 'sms'), { kind: 'connect' })
  t.match(h.engine.route(both.proxyNumber, us(62), now), { kind: 'connect' }, 'voice by default')
  t.equal(h.engine.get(voice.id)?.channels, Channel.VOICE)
  t.equal(h.engine.get(sms.id)?.channels, Channel.SMS)
  t.equal(h.engine.get(both.id)?.channels, undefined, 'both: the default, left out')
  // Other fields and later versions keep the bits.
  h.send(voice.id, { type: 'end' })
  t.match(h.engine.get(voice.id), { state: 'GRACE_PERIOD', channels: Channel.VOICE })
  t.match(h.engine.route(voice.proxyNumber, AGENT, h.clock.now, 'sms'), { kind: 'channel-not-allowed' })
})

t.test('stickyProxy: the preferred proxy when it can carry the session, else the usual allocation', async t => {
  const h = harness({ cooldownMs: 15 * MINUTE })
  // Without a preference the first session takes us(0); prefer us(2) instead.
  const a = h.create({ preferProxy: us(2) })
  t.equal(a.proxyNumber, us(2), 'a free number out of cooldown')
  // A party live on it (the overlap rule): the usual allocation.
  const b = h.create({ preferProxy: us(2), customerPhone: us(70) })
  t.not(b.proxyNumber, us(2), 'the agent is live on it')
  // Held by this tenant and neither party on it: taken.
  const c = h.create({ preferProxy: us(2), agentPhone: us(53), customerPhone: us(71) })
  t.equal(c.proxyNumber, us(2))
  // Held by another tenant: not taken.
  const d = h.create({ tenantId: TENANT_B.id, preferProxy: us(2), agentPhone: us(54), customerPhone: us(72) })
  t.not(d.proxyNumber, us(2))
  // Released and still cooling down: not taken; once out of cooldown: taken.
  h.send(d.id, { type: 'end' })
  h.clock.advance(15 * MINUTE)
  h.tick()
  const cooling = d.proxyNumber
  const e = h.create({ preferProxy: cooling, agentPhone: us(55), customerPhone: us(73), tenantId: TENANT_B.id })
  t.not(e.proxyNumber, cooling, 'cooling down')
  h.clock.advance(15 * MINUTE)
  const f = h.create({ preferProxy: cooling, agentPhone: us(56), customerPhone: us(74), tenantId: TENANT_B.id })
  t.equal(f.proxyNumber, cooling, 'out of cooldown')
  // Excluded (the store refused it a moment ago): the usual allocation.
  const g = h.create({ preferProxy: us(1), agentPhone: us(57), customerPhone: us(75) }, new Set([us(1)]))
  t.not(g.proxyNumber, us(1))
  // A number not in the pool: ignored.
  const x = h.create({ preferProxy: '+12025559999' as never, agentPhone: us(58), customerPhone: us(76) })
  t.ok(x.proxyNumber)
})
