// GET /v1/stream?after=<id> through the whole service, on both backends: a client cut again and
// again (the server closing it at its token's expiry, the client dropping the TCP connection)
// while call events flow, resuming each time from the last id it got, ends with every event of
// its tenant after its first id, once each, in id order; an `after` too old, unknown or another
// tenant's is closed with 4410 resync_required; a malformed one is refused with a 400; `types`
// applies to the replay; a backlog of 30,000 events (~10 MB, ten times the socket's limit) is
// replayed whole, in order, to a client that stops reading for 2 s (the pacing itself, not
// observable through loopback's large kernel buffers, is tested in test/stream/resume-pacing.test.ts).
import t, { type Test } from 'tap'
import { sql } from 'slonik'
import { startTestService, type TestService } from '../support/service.js'
import { connectWs, type HandshakeRefused, type WsClient } from '../support/ws-client.js'
import { issueToken } from '../../api/auth/tokens.js'
import { uuidv7 } from '../../sql/vocabulary/ids.js'
import { buildEnvelope, type EventEnvelope, type EventData, type EventType } from '../../sql/vocabulary/event-envelope.js'
import { insertOutbox } from '../../sql/outbox.js'

const sleep = (ms: number) => new Promise(r => setTimeout(r, ms))

/** An event whose id says `ms` (uuidv7() never goes back in time), the `n`th of that millisecond. */
function eventAt(type: EventType, ms: number, n: number, data: EventData): EventEnvelope {
  const h = ms.toString(16).padStart(12, '0')
  return buildEnvelope(`${h.slice(0, 8)}-${h.slice(8)}-7000-8000-${n.toString(16).padStart(12, '0')}`, type, ms, data)
}

async function stream(t: Test, api: TestService, token: string, query = ''): Promise<WsClient> {
  const c = await connectWs(`${api.url}/v1/stream${query}`, { headers: { authorization: `Bearer ${token}` } })
  t.teardown(() => { c.socket.destroy() })
  return c
}

const ids = (c: WsClient) => c.messages.map(m => (JSON.parse(m) as EventEnvelope).id)

async function outboxIds(api: TestService, tenantId: string, after: string): Promise<string[]> {
  return (await api.svc.db.pool.anyFirst(sql.unsafe`
    SELECT id FROM outbox WHERE tenant_id = ${tenantId} AND id > ${after}::uuid ORDER BY id`)) as string[]
}

t.test('a client cut again and again while events flow gets every event once, in order', async t => {
  const api = await startTestService(t)
  const acct = await api.signup()
  const first = await stream(t, api, acct.token)
  const sessions: Array<{ proxyNumber: string }> = []
  for (let i = 0; i < 4; i++) {
    const r = await api.req('POST', '/v1/sessions', { token: acct.token, body: { agentPhone: api.phone(10 + i), customerPhone: api.phone(20 + i) } })
    t.equal(r.status, 201)
    sessions.push(r.body as { proxyNumber: string })
  }
  await first.waitForMessages(1, 5_000)
  const start = ids(first)[0]!
  first.socket.destroy()

  // The flow: voice callbacks six at a time, so call events are minted and committed concurrently
  // (written behind, in record batches: commit order is not id order).
  const CALLS = 360
  let made = 0
  const flow = (async () => {
    await Promise.all(Array.from({ length: 6 }, async () => {
      while (made < CALLS) {
        const n = made++
        const s = sessions[n % sessions.length]!
        const i = n % sessions.length
        const res = await api.driver.voice({ from: n % 2 ? api.phone(10 + i) : api.phone(20 + i), to: s.proxyNumber, callSid: `resume-${n}` })
        await res.arrayBuffer()
      }
    }))
    await api.svc.flushRecords()
  })()

  const got: string[] = []
  let cuts = 0
  const cutsBy = { server: 0, client: 0 }
  const mint = (ttl: number) => issueToken(api.svc.services.jwtSecret, { typ: 'tenant', sub: 'key', tenantId: acct.tenantId, tier: 'STARTER', scopes: ['api'] }, Date.now(), ttl)
  let flowDone = false
  void flow.then(() => { flowDone = true })
  while (!flowDone || cuts < 4) {
    const c = await stream(t, api, await mint(2), `?after=${got.at(-1) ?? start}`)
    if (cuts % 2 === 0) {
      const code = await c.closed
      if (code !== 1008) t.comment(api.logLines.filter(l => l.includes('resync') || l.includes('late') || l.includes('replay')).slice(-3).join('\n'))
      t.equal(code, 1008, 'the server closed the socket (its token expired)')
      cutsBy.server++
    } else {
      await sleep(150 + Math.random() * 200)
      c.socket.destroy()
      cutsBy.client++
    }
    got.push(...ids(c))
    cuts++
  }
  await flow
  // The last connection stays until the outbox's every event is in.
  const want = await outboxIds(api, acct.tenantId, start)
  const last = await stream(t, api, acct.token, `?after=${got.at(-1) ?? start}`)
  await last.waitForMessages(want.length - got.length, 10_000).catch(() => {})
  await sleep(300) // anything extra would show
  got.push(...ids(last))
  t.ok(cutsBy.server >= 2 && cutsBy.client >= 2, `cut ${cuts} times (${cutsBy.server} by the server, ${cutsBy.client} by the client)`)
  t.ok(want.length >= CALLS, `${want.length} events in the outbox after the first`)
  t.equal(new Set(got).size, got.length, '0 duplicated')
  t.same(got.filter(id => !want.includes(id)), [], 'nothing but the tenant\'s events')
  t.same(want.filter(id => !got.includes(id)), [], '0 lost')
  t.same(got, want, 'in id order')
})

t.test('after: too old, unknown or another tenant\'s closes with 4410; malformed is a 400; types filter the replay', async t => {
  const api = await startTestService(t, { env: { STREAM_REPLAY_HOURS: '24' } })
  const [acct, other] = await Promise.all([api.signup(), api.signup()])
  const live = await stream(t, api, acct.token)
  const r = await api.req('POST', '/v1/sessions', { token: acct.token, body: { agentPhone: api.phone(1), customerPhone: api.phone(2) } })
  t.equal(r.status, 201)
  await live.waitForMessages(2, 5_000)
  const [created, activated] = live.messages.map(m => JSON.parse(m) as EventEnvelope)
  t.same([created!.type, activated!.type], ['session.created', 'session.activated'])
  t.equal((await outboxIds(api, acct.tenantId, '00000000-0000-0000-0000-000000000000')).includes(created!.id), true, 'the frame\'s id is the outbox row\'s id')

  // 25 h old and still in the outbox: out of the 24 h window.
  const old = eventAt('session.created', Date.now() - 25 * 3_600_000, 0, { sessionId: uuidv7(), tenantId: acct.tenantId, proxyNumber: '+12025550100', state: 'ACTIVE' })
  await insertOutbox(api.svc.db.pool, [old])
  for (const [what, after, token] of [['too old', old.id, acct.token], ['unknown', uuidv7(), acct.token], ['another tenant\'s', created!.id, other.token]] as const) {
    const c = await stream(t, api, token, `?after=${after}`)
    t.equal(await c.closed, 4410, `${what}: closed with 4410`)
    t.equal(c.closeReason, 'resync_required', `${what}: reason resync_required`)
    t.same(c.messages, [], `${what}: nothing sent`)
  }
  for (const bad of ['nope', '123', `${created!.id}&after=${created!.id}`]) {
    const refused = await connectWs(`${api.url}/v1/stream?after=${bad}`, { headers: { authorization: `Bearer ${acct.token}` } }).then(() => null, (e: HandshakeRefused) => e)
    t.equal(refused?.status, 400, `after=${bad}: 400`)
    t.match(JSON.parse(refused!.body), { status: 400, errors: [{ field: 'after' }] })
  }

  const swap = await api.req('PATCH', `/v1/sessions/${r.body.id}/target`, { token: acct.token, body: { customerPhone: api.phone(3) } })
  t.equal(swap.status, 200)
  await live.waitForMessages(3, 5_000)
  const filtered = await stream(t, api, acct.token, `?after=${created!.id}&types=session.target_swapped`)
  await filtered.waitForMessages(1, 5_000)
  await sleep(300)
  t.same(filtered.messages.map(m => (JSON.parse(m) as EventEnvelope).type), ['session.target_swapped'], 'the replay skips session.activated: not of the requested types')
  const all = await stream(t, api, acct.token, `?after=${created!.id}`)
  await all.waitForMessages(2, 5_000)
  t.same(all.messages.map(m => (JSON.parse(m) as EventEnvelope).type), ['session.activated', 'session.target_swapped'], 'without types: both')
})

t.test('a backlog ten times the 1 MiB socket limit is replayed whole, in order, to a client that pauses', async t => {
  const api = await startTestService(t)
  const acct = await api.signup()
  const N = 30_000
  const base = Date.now() - 3_600_000
  const backlog = Array.from({ length: N }, (_, i) => eventAt('call.ended', base + i, i, {
    sessionId: uuidv7(), tenantId: acct.tenantId, proxyNumber: '+12025550100', callId: uuidv7(), direction: 'A_TO_B', status: 'COMPLETED', durationSeconds: i,
  }))
  for (let i = 0; i < N; i += 5_000) await insertOutbox(api.svc.db.pool, backlog.slice(i, i + 5_000))
  const cursor = eventAt('session.created', base - 1, 0, { sessionId: uuidv7(), tenantId: acct.tenantId, proxyNumber: '+12025550100', state: 'ACTIVE' })
  await insertOutbox(api.svc.db.pool, [cursor])

  const c = await stream(t, api, acct.token, `?after=${cursor.id}`)
  c.socket.pause()
  const closedEarly = await Promise.race([c.closed.then(code => `closed ${code}`), sleep(2_000).then(() => null)])
  t.equal(closedEarly, null, 'still open after 2 s of not reading')
  c.socket.resume()
  await c.waitForMessages(N, 60_000)
  const got = ids(c)
  t.equal(got.length, N)
  t.same(got, backlog.map(e => e.id), 'every event, in order')
})
